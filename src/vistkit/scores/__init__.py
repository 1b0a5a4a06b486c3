"""What is done with scores once metrics have produced them: confidence intervals and paired significance
between systems (`stats`), and the dHM human-model distance (`distance` from score tables, `dhm` end to end)."""

#: the seed of every bootstrap and randomisation test unless one is given: sacreBLEU's (SACREBLEU_SEED)
DEFAULT_SEED = 12345
