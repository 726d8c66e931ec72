"""A BERT forward pass in numpy (float64), the oracle the converted GGUF's llama.cpp output is checked against.

Written from the BERT paper's definition and Hugging Face's tensor names, not from llama.cpp:
embeddings (word + position + token type) and LayerNorm; per layer, self-attention with a
residual and LayerNorm, then a GELU feed-forward with a residual and LayerNorm. The GELU is
the exact one (erf), as in Hugging Face's ``gelu``. The weights are read with the
``safetensors`` package, not with the converter's own reader.
"""

from __future__ import annotations

import math

import numpy as np
from safetensors.numpy import load

_erf = np.frompyfunc(math.erf, 1, 1)


class NumpyBert:
    """A BERT encoder over the weights of a ``model.safetensors`` (bytes)."""

    def __init__(self, safetensors_bytes: bytes, config: dict):
        raw = load(safetensors_bytes)
        self.w = {(k[5:] if k.startswith("bert.") else k): v.astype(np.float64) for k, v in raw.items()}
        self.layers = config["num_hidden_layers"]
        self.heads = config["num_attention_heads"]
        self.eps = config.get("layer_norm_eps", 1e-12)

    def _ln(self, x, name):
        mu = x.mean(-1, keepdims=True)
        var = ((x - mu) ** 2).mean(-1, keepdims=True)
        return (x - mu) / np.sqrt(var + self.eps) * self.w[f"{name}.weight"] + self.w[f"{name}.bias"]

    def _dense(self, x, name):
        return x @ self.w[f"{name}.weight"].T + self.w[f"{name}.bias"]

    def hidden_states(self, ids: list[int]) -> np.ndarray:
        """The last layer's output, one row per token (one sequence, token type 0 throughout)."""
        w, n = self.w, len(ids)
        x = (w["embeddings.word_embeddings.weight"][ids] + w["embeddings.position_embeddings.weight"][:n]
             + w["embeddings.token_type_embeddings.weight"][0])
        x = self._ln(x, "embeddings.LayerNorm")
        for i in range(self.layers):
            p = f"encoder.layer.{i}"
            d = x.shape[1] // self.heads
            q, k, v = (self._dense(x, f"{p}.attention.self.{m}").reshape(n, self.heads, d).transpose(1, 0, 2)
                       for m in ("query", "key", "value"))
            scores = q @ k.transpose(0, 2, 1) / math.sqrt(d)
            scores = np.exp(scores - scores.max(-1, keepdims=True))
            attn = scores / scores.sum(-1, keepdims=True)
            ctx = (attn @ v).transpose(1, 0, 2).reshape(n, -1)
            x = self._ln(x + self._dense(ctx, f"{p}.attention.output.dense"), f"{p}.attention.output.LayerNorm")
            h = self._dense(x, f"{p}.intermediate.dense")
            h = 0.5 * h * (1.0 + _erf(h / math.sqrt(2.0)).astype(np.float64))
            x = self._ln(x + self._dense(h, f"{p}.output.dense"), f"{p}.output.LayerNorm")
        return x

    def mean_pooled(self, ids: list[int]) -> np.ndarray:
        """sentence-transformers' mean pooling over every token of one unpadded sequence ([CLS] and [SEP] too)."""
        return self.hidden_states(ids).mean(0)

    def classifier_logits(self, ids: list[int]) -> np.ndarray:
        """``BertForSequenceClassification``: the pooler (dense + tanh on [CLS]), then the classifier."""
        pooled = np.tanh(self._dense(self.hidden_states(ids)[0], "pooler.dense"))
        return self._dense(pooled, "classifier")
