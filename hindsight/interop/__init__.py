"""Interoperability: OTF2, Perfetto/Chrome JSON, GOAL schedules and pipit-style frames."""
