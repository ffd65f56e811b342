import torch
import torch.nn as nn
import torch.nn.functional as F


class Model(nn.Module):
    """A pointer-generator's output distribution in log space: log p_gen + log_softmax(vocab
    logits) and log(1 - p_gen) + log_softmax(copy logits) combined by torch.logaddexp, with the
    gate one logit per row broadcast over the vocabulary."""
    def __init__(self):
        super(Model, self).__init__()

    def forward(self, vocab_logits, copy_logits, gate_logit):
        log_vocab = F.log_softmax(vocab_logits, dim=-1) + F.logsigmoid(gate_logit)
        log_copy = F.log_softmax(copy_logits, dim=-1) + F.logsigmoid(-gate_logit)
        return torch.logaddexp(log_vocab, log_copy)


batch = 256
vocab = 32000


def get_inputs():
    return [torch.randn(batch, vocab), torch.randn(batch, vocab) * 2.0, torch.randn(batch, 1)]


def get_init_inputs():
    return []
