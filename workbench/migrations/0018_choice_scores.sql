-- A one-pass choice (nli's labels, the relevance judge's Yes/No) keeps each option's probability, not only
-- the option chosen: the relevance judge stores P(Yes) as its score, nli the probability of its label
-- (issue 38). JSON list in the options' order; NULL for a generation, and for a choice cached before this.
ALTER TABLE generations ADD COLUMN scores TEXT;
