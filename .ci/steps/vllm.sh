#!/usr/bin/env bash
# vLLM step: chatparse's vLLM plugin tested on vLLM 0.33.0's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/vllm.sh   (called by .ci/run; prints its own elapsed time)
#
# Install (engine-step.bash): CPU torch, then --no-deps from the exact pins of vllm-requirements.txt:
# vLLM without its own pins (they ask for CUDA torch 2.14), what its parser code and its OpenAI API
# server import (the end-to-end test builds the server), XGrammar (its structured-output backend:
# the forced-call tests compile the attached constraint), and the test tools.
# Left out on purpose: triton (xgrammar's Linux dependency, ~1 GB unpacked; nothing here imports it).
set -euo pipefail
source .ci/steps/engine-step.bash
engine_step vllm .ci/steps/vllm-requirements.txt CHATPARSE_REQUIRE_VLLM torch==2.13.0 \
    tests/integrations/test_common.py tests/integrations/test_vllm.py tests/integrations/test_vllm_corpus.py \
    tests/integrations/test_vllm_serving.py
