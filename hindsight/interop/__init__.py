"""Interoperability: traces to and from other tools' formats.

``formats`` is the registry ``hindsight export``/``import`` dispatch through; one module per
format: ``otf2_export``/``otf2_import`` (with what they share in ``otf2``), ``perfetto``,
``goal`` (LogGOPSim schedules; the language itself is ``replay.loggopsim.goal``) and ``pipit``;
``timeline`` holds the columns every exporter reads.
"""
