"""LogGOPSim in hindsight: its schedule simulator and the schedules it runs.

``simulator`` is LogGOPSim's event-driven algorithm on flat arrays (nothing of hindsight);
``goal`` reads and writes its GOAL schedule language; ``schedule`` turns a trace into a schedule
(or finds the one a trace was imported from); ``rows`` maps the simulated operations back to the
trace's rows. ``replay.models.loggopsim`` is the model that replays through them.
"""
