"""Meta-evaluation: how far each checker's verdicts agree with people's pairwise preferences."""
