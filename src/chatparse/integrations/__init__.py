"""chatparse inside inference engines: parser plugins for vLLM and SGLang.

* `chatparse.integrations.vllm`: a tool parser and a reasoning parser registered as `chatparse`
  (`vllm serve MODEL --enable-auto-tool-choice --tool-call-parser chatparse --reasoning-parser
  chatparse`), composed into one unified `vllm.parser.Parser` that drives a `chatparse.openai.ChatParser`.
* `chatparse.integrations.sglang`: a tool-call detector and a reasoning detector registered as
  `chatparse` (`python -m sglang.launch_server ... --tool-call-parser chatparse --reasoning-parser
  chatparse`).

Both are loaded by the engines' plugin entry points (`vllm.general_plugins`, `sglang.srt.plugins`)
once chatparse is installed next to the engine; neither module is imported here, so importing
`chatparse.integrations` never imports an engine.

The template comes from the tokenizer's `response_template`, else the catalog (by model id, then by
chat template), else `CHATPARSE_TEMPLATE` (a catalog name or a JSON file); `CHATPARSE_TEMPLATE_OVERRIDE`
wins over all of them. Policies and their environment switches: `chatparse.integrations._common`.
"""
