"""Chat templates: whether a prompt goes through the model's own chat template, and where a model's turn ends.

The paper's three models are chat/instruct models (Section 4.1). Fed a raw ``Question: ...\\nAnswer:`` they run on
into new questions and the reward falls back to the last number; prompted through their tokenizer's chat template
they answer one turn and stop at their end-of-turn token. This module holds the two decisions every stage shares:

- :func:`use_chat_template`: the ``chat_template`` setting (``true`` | ``false`` | ``auto``) of a ``data.*``,
  ``benchmarks.*`` or ``evaluation`` section against the tokenizer at hand (``true`` without a template is an
  error naming the key; ``auto`` uses the template when there is one);
- :func:`end_of_turn_ids`: the token(s) that close an assistant turn, read off the template itself by rendering a
  conversation and looking at what follows the assistant's text. Some templates end a turn with the end-of-sequence
  token (DeepSeek, Qwen's ``<|im_end|>`` is also its eos), others with a marker that is not the tokenizer's eos
  (Nemotron-Mini's ``<extra_id_1>`` opens the next turn); :func:`stop_token_ids` is the union with the model's own
  eos ids, which generation must stop at (``model.generate``'s ``eos_token_id``, vLLM's ``stop_token_ids``), and
  :func:`add_stop_tokens` writes it into a model's ``generation_config`` so that TRL's trainer, its completion mask
  and a saved merged model all stop there too.

"""

from __future__ import annotations

from typing import Any, Iterable

from pgrpo.errors import InputError

#: The values a ``chat_template`` setting may take (YAML booleans, or ``auto``); None reads as false.
CHAT_SETTINGS: tuple[Any, ...] = (True, False, "auto", None)


#: Text that no chat template contains, to find the assistant's turn in a rendered conversation.
_MARK = "PGRPO_ASSISTANT_TEXT_7f3a"


def check_prompt_template(where: str, template: Any) -> None:
    """``{where}.prompt_template`` is None (the default) or a string with ``{question}``; else an InputError."""
    if template is not None and (not isinstance(template, str) or "{question}" not in template):
        raise InputError(f"{where}.prompt_template must contain '{{question}}', got {template!r}")


def check_prompt_settings(where: str, section: dict) -> None:
    """``{where}.prompt_template`` (:func:`check_prompt_template`) and ``{where}.chat_template`` (true, false, auto
    or null) of a config section, before any model is loaded."""
    check_prompt_template(where, section["prompt_template"])
    if section["chat_template"] not in CHAT_SETTINGS:
        raise InputError(f"{where}.chat_template must be true, false or auto, got {section['chat_template']!r}")


def has_chat_template(tokenizer: Any) -> bool:
    return bool(getattr(tokenizer, "chat_template", None))


def use_chat_template(setting: Any, tokenizer: Any, where: str) -> bool:
    """Whether prompts are rendered with the tokenizer's chat template; ``where`` names the config key in errors."""
    if setting in (False, None, "false"):
        return False
    if setting == "auto":
        return has_chat_template(tokenizer)
    if setting in (True, "true"):
        if tokenizer is not None and not has_chat_template(tokenizer):
            raise InputError(f"{where}.chat_template is true but the model's tokenizer has no chat template "
                             "(set it to false or auto)")
        return True
    raise InputError(f"{where}.chat_template must be true, false or auto, got {setting!r}")


def _special_ids(tokenizer: Any) -> set[int]:
    ids = set(getattr(tokenizer, "all_special_ids", []) or [])
    decoder = getattr(tokenizer, "added_tokens_decoder", None) or {}
    ids.update(int(i) for i, token in decoder.items() if getattr(token, "special", True))
    return ids


def _ids(encoded: Any) -> list[int]:
    if hasattr(encoded, "keys"):
        encoded = encoded["input_ids"]
    return [int(i) for i in encoded]


def end_of_turn_ids(tokenizer: Any) -> list[int]:
    """The special token that closes an assistant turn in the tokenizer's chat template ([] without a template).

    Renders ``user, assistant(MARK), user`` and returns the first special (or added) token after MARK: the token a
    model writes to end its turn, whether the template puts it at the end of the assistant message or at the start
    of the next message.
    """
    if not has_chat_template(tokenizer):
        return []
    conversation = [{"role": "user", "content": "1+1?"}, {"role": "assistant", "content": _MARK},
                    {"role": "user", "content": "2+2?"}]
    try:
        text = tokenizer.apply_chat_template(conversation, tokenize=False)
    except Exception:  # noqa: BLE001 - a template that refuses this conversation: try one turn less
        try:
            text = tokenizer.apply_chat_template(conversation[:2], tokenize=False)
        except Exception:  # noqa: BLE001
            return []
    if _MARK not in text:
        return []
    tail = text[text.index(_MARK) + len(_MARK):]
    special = _special_ids(tokenizer)
    for token_id in _ids(tokenizer(tail, add_special_tokens=False)):
        if token_id in special:
            return [token_id]
    return []


def _as_list(value: Any) -> list[int]:
    if value is None:
        return []
    if isinstance(value, (list, tuple, set)):
        return [int(v) for v in value if v is not None]
    return [int(value)]


def stop_token_ids(tokenizer: Any, model_eos: Any = None, chat: bool = False) -> list[int]:
    """Every id generation stops at: the model's eos ids (``generation_config.eos_token_id``), the tokenizer's eos
    and, for chat-rendered prompts, the template's end-of-turn token; in that order, without repeats."""
    ids: list[int] = []
    for token_id in [*_as_list(model_eos), *_as_list(getattr(tokenizer, "eos_token_id", None)),
                     *(end_of_turn_ids(tokenizer) if chat else [])]:
        if token_id not in ids:
            ids.append(token_id)
    return ids


def add_stop_tokens(model: Any, tokenizer: Any, chat: bool) -> list[int]:
    """Set ``model.generation_config.eos_token_id`` to :func:`stop_token_ids` (what TRL and ``generate`` stop at,
    and what ``save_pretrained`` writes for vLLM to read back); returns the ids."""
    config = getattr(model, "generation_config", None)
    ids = stop_token_ids(tokenizer, getattr(config, "eos_token_id", None), chat)
    if config is not None and ids:
        config.eos_token_id = ids if len(ids) > 1 else ids[0]
    return ids


def any_chat(settings: Iterable[Any]) -> bool:
    """Whether any of these ``chat_template`` settings may use a template (true or auto)."""
    return any(s not in (None, False, "false") for s in settings)
