"""Zoo models built from Hugging Face transformers configs: shrunk, randomly initialised.

Each builder returns (module, example inputs by name, config overrides); the module's forward
takes the inputs positionally and returns a tuple of tensors (the outputs the zoo keeps).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import torch
import transformers as hf

SEQ = 16  # tokens per text input
VOCAB = 128  # a small vocabulary keeps the embedding tables small
TEXT = dict(
    hidden_size=64,
    num_hidden_layers=2,
    num_attention_heads=4,
    intermediate_size=128,
    vocab_size=VOCAB,
    max_position_embeddings=32,
    initializer_range=0.1,
)


class Outputs(torch.nn.Module):
    """A model called with keywords, returning the named outputs as a tuple."""

    def __init__(self, model: torch.nn.Module, input_names: list[str], output_names: list[str]):
        super().__init__()
        self.model, self.input_names, self.output_names = model, input_names, output_names

    def forward(self, *args: torch.Tensor) -> tuple[torch.Tensor, ...]:
        """The model's outputs, picked by name."""
        out = self.model(**dict(zip(self.input_names, args)), return_dict=True)
        return tuple(out[name] for name in self.output_names)


def token_inputs(mask: bool = True, generator: torch.Generator | None = None) -> dict:
    """input_ids [1, SEQ] (and an attention mask whose last 3 tokens are padding)."""
    ids = torch.randint(0, VOCAB, (1, SEQ), generator=generator)
    if not mask:
        return {"input_ids": ids}
    attention = torch.ones(1, SEQ, dtype=torch.int64)
    attention[0, -3:] = 0
    return {"input_ids": ids, "attention_mask": attention}


def image(size: int, generator: torch.Generator, channels: int = 3) -> dict:
    """pixel_values [1, channels, size, size]."""
    return {"pixel_values": torch.randn(1, channels, size, size, generator=generator)}


def wrap(model: torch.nn.Module, inputs: dict, outputs: list[str]) -> torch.nn.Module:
    """The model in eval mode, called by `Outputs`."""
    return Outputs(model.eval(), list(inputs), outputs)


def _config(cls: type, **overrides: Any) -> Any:
    """A config with eager attention (plain MatMul/Softmax; no fused SDPA in the graph)."""
    config = cls(**overrides)
    config._attn_implementation = "eager"
    return config


def resnet(g):
    """ResNet-50-style bottleneck blocks, one per stage, widths 16..128, 64x64 input."""
    c = dict(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        layer_type="bottleneck",
        num_labels=10,
    )
    inputs = image(64, g)
    model = hf.ResNetForImageClassification(hf.ResNetConfig(**c))
    return wrap(model, inputs, ["logits"]), inputs, c


def mobilenet_v2(g):
    """MobileNetV2 (its full block sequence), width x0.1, 64x64 input."""
    c = dict(depth_multiplier=0.1, image_size=64, num_labels=10, finegrained_output=False)
    inputs = image(64, g)
    model = hf.MobileNetV2ForImageClassification(hf.MobileNetV2Config(**c))
    return wrap(model, inputs, ["logits"]), inputs, c


def efficientnet(g):
    """EfficientNet-B0 layout (MBConv + SE, SiLU), width x0.15, depth x0.25, 64x64."""
    c = dict(
        width_coefficient=0.15, depth_coefficient=0.25, image_size=64, hidden_dim=192, num_labels=10
    )
    inputs = image(64, g)
    model = hf.EfficientNetForImageClassification(hf.EfficientNetConfig(**c))
    return wrap(model, inputs, ["logits"]), inputs, c


def convnext(g):
    """ConvNeXt: one block per stage, widths 8..64, 64x64 input."""
    c = dict(hidden_sizes=[8, 16, 32, 64], depths=[1, 1, 1, 1], num_labels=10)
    inputs = image(64, g)
    model = hf.ConvNextForImageClassification(hf.ConvNextConfig(**c))
    return wrap(model, inputs, ["logits"]), inputs, c


def regnet(g):
    """RegNetY: group convs with SE, one block per stage, 64x64 input."""
    c = dict(
        embedding_size=16,
        hidden_sizes=[16, 32, 64, 128],
        depths=[1, 1, 1, 1],
        groups_width=8,
        layer_type="y",
        num_labels=10,
    )
    inputs = image(64, g)
    model = hf.RegNetForImageClassification(hf.RegNetConfig(**c))
    return wrap(model, inputs, ["logits"]), inputs, c


def _text(cls, config_cls, outputs, mask=True, **extra):
    """A text encoder/decoder builder over `TEXT` settings."""

    def build(g):
        c = {**TEXT, **extra}
        inputs = token_inputs(mask, g)
        return wrap(cls(_config(config_cls, **c)), inputs, outputs), inputs, c

    return build


bert = _text(hf.BertModel, hf.BertConfig, ["last_hidden_state", "pooler_output"])
roberta = _text(
    hf.RobertaModel, hf.RobertaConfig, ["last_hidden_state", "pooler_output"], num_hidden_layers=1
)
albert = _text(
    hf.AlbertModel,
    hf.AlbertConfig,
    ["last_hidden_state", "pooler_output"],
    embedding_size=32,
    num_hidden_layers=1,
)
distilbert = _text(
    hf.DistilBertModel,
    hf.DistilBertConfig,
    ["last_hidden_state"],
    dim=64,
    n_layers=1,
    num_hidden_layers=1,
    n_heads=4,
    hidden_dim=128,
)
gpt2 = _text(
    hf.GPT2LMHeadModel,
    hf.GPT2Config,
    ["logits"],
    mask=False,
    n_embd=64,
    n_layer=1,
    num_hidden_layers=1,
    n_head=4,
    n_positions=32,
    n_inner=128,
    use_cache=False,
)
t5_encoder = _text(
    hf.T5EncoderModel,
    hf.T5Config,
    ["last_hidden_state"],
    d_model=64,
    d_kv=16,
    d_ff=128,
    num_layers=1,
    num_hidden_layers=1,
    num_heads=4,
    feed_forward_proj="gated-gelu",
    relative_attention_num_buckets=8,
)
llama = _text(
    hf.LlamaForCausalLM,
    hf.LlamaConfig,
    ["logits"],
    mask=False,
    num_key_value_heads=2,
    rms_norm_eps=1e-5,
    use_cache=False,
    rope_theta=10000.0,
)


def vit(g):
    """ViT: 2 layers, hidden 64, 8x8 patches of a 64x64 image (64 tokens + CLS)."""
    c = dict(
        hidden_size=64,
        num_hidden_layers=2,
        num_attention_heads=4,
        intermediate_size=128,
        image_size=64,
        patch_size=8,
        num_labels=10,
        initializer_range=0.1,
    )
    inputs = image(64, g)
    model = hf.ViTForImageClassification(_config(hf.ViTConfig, **c))
    return wrap(model, inputs, ["logits"]), inputs, c


def vit_b_16(g):
    """ViT-B/16 at full size (86M parameters, 224x224): a compile-time benchmark, not committed."""
    c = dict(num_labels=1000)
    inputs = image(224, g)
    model = hf.ViTForImageClassification(_config(hf.ViTConfig, **c))
    return wrap(model, inputs, ["logits"]), inputs, c


def swin(g):
    """Swin: two stages of two blocks (plain and shifted windows of 4x4), 64x64 input."""
    c = dict(
        image_size=64,
        patch_size=4,
        embed_dim=16,
        depths=[2, 2],
        num_heads=[2, 4],
        window_size=4,
        num_labels=10,
    )
    inputs = image(64, g)
    model = hf.SwinForImageClassification(_config(hf.SwinConfig, **c))
    return wrap(model, inputs, ["logits"]), inputs, c


def clip_text(g):
    """CLIP text tower with its projection: 1 layer, hidden 64, causal mask + padding."""
    c = dict(TEXT, num_hidden_layers=1, projection_dim=32)
    inputs = token_inputs(True, g)
    model = hf.CLIPTextModelWithProjection(_config(hf.CLIPTextConfig, **c))
    return wrap(model, inputs, ["text_embeds", "last_hidden_state"]), inputs, c


def clip_vision(g):
    """CLIP vision tower with its projection: 1 layer, 8x8 patches, QuickGELU."""
    c = dict(
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=128,
        image_size=64,
        patch_size=8,
        projection_dim=32,
    )
    inputs = image(64, g)
    model = hf.CLIPVisionModelWithProjection(_config(hf.CLIPVisionConfig, **c))
    return wrap(model, inputs, ["image_embeds", "last_hidden_state"]), inputs, c


def whisper_encoder(g):
    """Whisper encoder: conv stem over 16 mel bins x 32 frames, 1 layer."""
    c = dict(
        num_mel_bins=16,
        d_model=64,
        encoder_layers=1,
        encoder_attention_heads=4,
        encoder_ffn_dim=128,
        decoder_layers=1,
        decoder_attention_heads=4,
        decoder_ffn_dim=128,
        max_source_positions=16,
        vocab_size=VOCAB,
        pad_token_id=0,
        bos_token_id=1,
        eos_token_id=2,
        decoder_start_token_id=1,
    )
    model = hf.WhisperModel(_config(hf.WhisperConfig, **c)).get_encoder()
    inputs = {"input_features": torch.randn(1, 16, 32, generator=g)}  # 2 x max_source_positions
    return wrap(model, inputs, ["last_hidden_state"]), inputs, c


def wav2vec2(g):
    """Wav2Vec2: 3-conv feature extractor (GroupNorm), conv positions, 1 layer."""
    c = dict(
        hidden_size=64,
        num_hidden_layers=1,
        num_attention_heads=4,
        intermediate_size=128,
        conv_dim=(32, 32, 32),
        conv_stride=(5, 2, 2),
        conv_kernel=(10, 3, 3),
        num_conv_pos_embeddings=16,
        num_conv_pos_embedding_groups=4,
        feat_extract_norm="group",
        do_stable_layer_norm=False,
    )
    model = hf.Wav2Vec2Model(_config(hf.Wav2Vec2Config, **c))
    inputs = {"input_values": torch.randn(1, 1600, generator=g)}
    return wrap(model, inputs, ["last_hidden_state"]), inputs, c


BUILDERS: dict[str, Callable] = {
    "resnet": resnet,
    "mobilenet_v2": mobilenet_v2,
    "efficientnet": efficientnet,
    "convnext": convnext,
    "regnet": regnet,
    "bert": bert,
    "roberta": roberta,
    "albert": albert,
    "distilbert": distilbert,
    "gpt2": gpt2,
    "t5_encoder": t5_encoder,
    "llama": llama,
    "vit": vit,
    "swin": swin,
    "clip_text": clip_text,
    "clip_vision": clip_vision,
    "whisper_encoder": whisper_encoder,
    "wav2vec2": wav2vec2,
}
