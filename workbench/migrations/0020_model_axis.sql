-- The model as an axis of a run's grid (`run --model A,B,C`): each cell names the model that answers it,
-- by its label (workbench.models.locate.model_label); NULL in a run of one model, as every run before it.
-- Such a run's cell ids start with the label ("smollm2/k5-b64-linear"), and its config holds each model's
-- generation settings under "generations" (label → settings) instead of one "generation".
ALTER TABLE cells ADD COLUMN model TEXT;
