"""Metrics: answer scoring (:mod:`.scoring`) and the dissipation ledger with bootstrap
intervals (:mod:`.ledger`). Import the submodules directly; this package imports nothing
heavy on its own."""
