"""Pretrain (or continue pretraining) a Llama or Gemma model from random initialisation.

    srun torchrun --nnodes=$SLURM_NNODES --nproc-per-node=$GPUS --rdzv-backend=c10d \\
        --rdzv-endpoint=$HEAD:$PORT -m jupyter_gtc.recipes.pretrain --model llama --size tiny

Writes checkpoints to AIP_CHECKPOINT_DIR (and resumes from the newest one when the job is
requeued), scalars to AIP_TENSORBOARD_LOG_DIR and the final model to AIP_MODEL_DIR, where
``AutoModelForCausalLM.from_pretrained`` loads it. ``--init-from`` starts from another run's
weights with a fresh optimizer and schedule: continued pretraining.
"""

from __future__ import annotations

import time

_PYTHON_UP = time.time()  # before torch: the startup line counts imports from here

import math  # noqa: E402
import os  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402

import torch  # noqa: E402

from . import data, models  # noqa: E402
from .checkpoint import Checkpointer, export_model, hf_source, load_weights  # noqa: E402
from .config import PretrainConfig, parse_args  # noqa: E402
from .distributed import World, init_world, parallelize, train_dtype, unwrap  # noqa: E402
from .metrics import TrainingMetrics  # noqa: E402
from .startup import StartupClock  # noqa: E402


def lr_at(step: int, config: PretrainConfig) -> float:
    """Linear warmup, then cosine decay to ``min_lr_ratio * lr`` at the last step."""
    if step <= config.warmup_steps:
        return config.lr * step / config.warmup_steps
    progress = (step - config.warmup_steps) / max(1, config.steps - config.warmup_steps)
    floor = config.min_lr_ratio
    return config.lr * (floor + (1 - floor) * 0.5 * (1 + math.cos(math.pi * min(1.0, progress))))


def prepare_tokenizer(config: PretrainConfig, world: World, checkpoints: Checkpointer, texts: list[str]):
    """The run's tokenizer, saved with the checkpoints so a resumed run and every rank use
    the very same one: from --tokenizer, from --init-from's model, or trained on the corpus."""
    folder = checkpoints.hf_folder
    if world.is_main and not (folder / "tokenizer.json").exists():
        if config.tokenizer:
            tokenizer = data.load_tokenizer(config.tokenizer)
        elif config.init_from:
            tokenizer = data.load_tokenizer(hf_source(config.init_from))
        else:
            tokenizer = data.train_tokenizer(texts, config.vocab_size)
        tokenizer.save_pretrained(folder)
    world.barrier()
    return data.load_tokenizer(folder)


def build(config: PretrainConfig, tokenizer, world: World, checkpoints: Checkpointer) -> torch.nn.Module:
    """The model with random weights (every rank the same), its config saved beside the
    tokenizer so the checkpoints describe themselves; without a tokenizer (a restart), built
    from that saved config."""
    if tokenizer is None:  # a restart: the config its first start saved
        from transformers import AutoConfig
        model_config = AutoConfig.from_pretrained(checkpoints.hf_folder)
    elif config.init_from:
        from transformers import AutoConfig
        model_config = AutoConfig.from_pretrained(hf_source(config.init_from))
    else:
        model_config = models.model_config(
            config.model, config.size, len(tokenizer), bos_token_id=tokenizer.bos_token_id,
            eos_token_id=tokenizer.eos_token_id, pad_token_id=tokenizer.pad_token_id)
    torch.manual_seed(config.seed)  # every rank starts from the same weights
    model = models.build_model(model_config)
    if world.is_main and tokenizer is not None:
        model_config.save_pretrained(checkpoints.hf_folder)
    return model


def hold_until(file: Path, say) -> None:
    """Wait until ``file`` exists. A test that requeues a run at this point finds it still
    running whatever the machine's speed, instead of racing it with extra steps."""
    if not file.exists():
        say(f"holding until {file} exists", flush=True)
        while not file.exists():
            time.sleep(0.1)


def train_step(model, optimizer, ids: torch.Tensor, autocast, grad_clip: float) -> tuple[torch.Tensor, float]:
    """One optimizer step on ``ids`` (next-token loss); returns this rank's loss and the
    gradient norm before clipping."""
    with autocast:
        loss = model(input_ids=ids, labels=ids).loss
    loss.backward()
    grad_norm = torch.nn.utils.clip_grad_norm_(model.parameters(), grad_clip)
    optimizer.step()
    optimizer.zero_grad(set_to_none=True)
    if hasattr(grad_norm, "full_tensor"):  # a DTensor under FSDP
        grad_norm = grad_norm.full_tensor()
    return loss, float(grad_norm)


def train(config: PretrainConfig) -> dict[str, float]:
    clock = StartupClock(_PYTHON_UP)
    clock.mark("imports")
    world = init_world()
    say = print if world.is_main else (lambda *a, **k: None)
    checkpoints = Checkpointer(config.checkpoint_dir, world, keep=config.keep_checkpoints)
    if world.is_main:
        for folder in (config.checkpoint_dir, config.model_dir, config.log_dir):
            folder.mkdir(parents=True, exist_ok=True)
    world.barrier()
    checkpoints.clean_partial()
    clock.mark("rendezvous")

    # A restart maps the token stream its first start kept and builds the model from the saved
    # config: no tokenizer load, no encoding (the tokenizer is loaded for the export only).
    resume = checkpoints.latest()
    tokens = data.cached_tokens(checkpoints.hf_folder, config.data) if resume is not None else None
    tokenizer = None
    if tokens is None:
        texts = data.load_texts(config.data)
        tokenizer = prepare_tokenizer(config, world, checkpoints, texts)
        tokens = data.encode_corpus(texts, tokenizer)
        if world.is_main:
            data.save_tokens(checkpoints.hf_folder, config.data, tokens)
        world.barrier()
    batches = data.TokenBatches(tokens, config.seq_len, config.global_batch, config.seed)
    clock.mark("data")
    model = build(config, tokenizer, world, checkpoints)
    # A restart of continued pretraining takes its weights from its own checkpoint: --init-from's
    # would only be read to be overwritten.
    base = load_weights(model, config.init_from) if config.init_from and resume is None else {}
    shape = models.shape_of(model, config.seq_len)
    dtype = train_dtype(config.dtype, world.device)
    models.apply_speedups(model, compile=config.compile == "on", checkpointing=config.activation_checkpointing == "on")
    model = parallelize(model, world, config.parallel, dtype)
    optimizer = torch.optim.AdamW(model.parameters(), lr=config.lr, weight_decay=config.weight_decay,
                                  betas=(0.9, 0.95), fused=world.device.type == "cuda")

    clock.mark("model")
    start = 1
    if resume is not None:
        state = checkpoints.load(resume, model, optimizer)
        start = state["step"] + 1
        say(f"resuming from {resume} (step {state['step']}, restart {os.environ.get('SLURM_RESTART_COUNT', 0)})")
    elif config.init_from:
        say(f"continuing from {config.init_from} (its step {base.get('step', '?')}, loss {base.get('loss', '?')})")
    clock.mark("checkpoint")
    label = unwrap(model).config.model_type if config.init_from else f"{config.model}-{config.size}"
    say(f"{label}: {shape.parameters / 1e6:.2f}M parameters, {len(batches.tokens)} tokens of "
        f"{config.data}, world {world.size} on {world.device.type}, {dtype}, steps {start}..{config.steps}", flush=True)

    metrics = TrainingMetrics(config.log_dir, shape, world.device, world.size, world.is_main, config.steps, start)
    # FSDP2 casts to bf16 itself (its MixedPrecisionPolicy); DDP and a lone process need autocast.
    sharded = world.size > 1 and config.parallel == "fsdp"
    autocast = torch.autocast(world.device.type, dtype=dtype, enabled=dtype != torch.float32 and not sharded)
    model.train()
    values: dict[str, float] = {}
    for step in range(start, config.steps + 1):
        lr = lr_at(step, config)
        for group in optimizer.param_groups:
            group["lr"] = lr
        ids = torch.from_numpy(batches.batch(step, world.rank, world.size)).to(world.device)
        loss, grad_norm = train_step(model, optimizer, ids, autocast, config.grad_clip)
        values = metrics.step(step, loss=world.mean(loss), lr=lr, grad_norm=grad_norm,
                              tokens=config.global_batch * config.seq_len)
        if step % config.log_every == 0 or step in (start, config.steps):
            say(f"step {step}/{config.steps} loss {values['train/loss']:.4f} lr {lr:.2e} "
                f"grad_norm {values['train/grad_norm']:.3f} tokens/s {values['perf/tokens_per_s']:.0f}"
                + (f" mfu {values['perf/mfu']:.1%}" if "perf/mfu" in values else ""), flush=True)
        if step == start:
            clock.mark("first step")
            say(clock.line(step), flush=True)
        checkpointed = step % config.checkpoint_every == 0 or step == config.steps
        if checkpointed:
            checkpoints.save(step, model, optimizer, {"loss": values["train/loss"]})
            metrics.flush()
        if config.hold_until and (step == config.hold_at_step if config.hold_at_step else checkpointed):
            metrics.flush()
            hold_until(Path(config.hold_until), say)
        if checkpointed or step == config.hold_at_step:
            metrics.restart_clock()

    metrics.close()
    recipe = {"recipe": "continued-pretrain" if config.init_from else "pretrain",
              "model": unwrap(model).config.model_type,
              "size": config.size, "data": config.data, "step": config.steps, "loss": values.get("train/loss"),
              "init_from": config.init_from}
    export_model(model, tokenizer or data.load_tokenizer(checkpoints.hf_folder), config.model_dir, world, recipe)
    say(f"model saved to {config.model_dir}", flush=True)
    world.close()
    return values


def main(argv: list[str] | None = None) -> None:
    from ..exceptions import GtcError
    try:
        config = parse_args(argv, description=__doc__.split("\n\n")[0])
    except GtcError as e:
        sys.exit(f"error: {e}")
    train(config)


if __name__ == "__main__":
    main()
