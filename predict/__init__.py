"""Prediction beyond the measured run: fitted cost models, synthetic traces, best P."""
