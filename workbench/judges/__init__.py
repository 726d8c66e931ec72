"""Trusting the judges: judged populations, the label queue, agreement and prediction-powered estimates."""
