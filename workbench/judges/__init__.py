"""Trusting the judges (issue 18): judged populations, the label queue, agreement and prediction-powered estimates."""
