"""Run plans, sweep grids and (later) the resumable executor."""
