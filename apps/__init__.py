"""Applications for hindsight: HDDI feature extraction, sorting and connected components.

Each application runs on application-agnostic paradigm skeletons (``apps.skeletons``, whose
``SKELETONS`` registry names the paradigms) that own all communication; the application only
supplies small user functions (paper 002's idea).

``APPS`` maps an application name (also its module name, ``python -m apps.<name>``) to the
paradigms it supports, in the names used on the command line. It is read by ``hindsight
collect`` to validate requests, so importing this package must stay cheap (no MPI here).
"""

from apps.skeletons import SKELETONS

PARADIGMS: tuple[str, ...] = tuple(SKELETONS)

APPS: dict[str, tuple[str, ...]] = {
    "feature_extraction": PARADIGMS,
    "sorting": PARADIGMS,
    "components": PARADIGMS,
}

__all__ = ["APPS", "PARADIGMS"]
