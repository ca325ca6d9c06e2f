"""Training recipes: Llama and Gemma pretraining, continued pretraining, SFT and RL.

The training programs (``python -m jupyter_gtc.recipes.pretrain`` and friends) run inside
jobs, launched by ``srun torchrun``; they import torch and transformers. The catalogue
(``catalogue.py``) only renders sbatch scripts and imports neither, so front ends can list
and launch recipes without paying for torch.
"""
