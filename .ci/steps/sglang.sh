#!/usr/bin/env bash
# SGLang step: chatparse's SGLang plugin tested on SGLang 0.5.23's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/sglang.sh   (called by .ci/run; prints its own elapsed time)
#
# Install (engine-step.bash): torch 2.14.1 and torchvision 0.29.1 first, then --no-deps from the
# exact pins of sglang-requirements.txt: SGLang without its own pins, what its parser code and its
# OpenAI server import (sglang/__init__ imports triton and IPython; the end-to-end test builds the
# HTTP app, whose import chain reaches torchvision through a multimodal model config), XGrammar
# (SGLang's grammar backend: the forced-call tests compile the attached constraint with it), and
# the test tools. torch is the CUDA build here (the machine has no GPU; nothing runs on one): the
# only torchvision wheels reachable need a CUDA torch (0.28 beside the CPU build of 2.13.0 fails
# with "operator torchvision::nms does not exist"), so this venv is about 6 GB.
set -euo pipefail
source .ci/steps/engine-step.bash
engine_step sglang .ci/steps/sglang-requirements.txt CHATPARSE_REQUIRE_SGLANG "torch==2.14.1 torchvision==0.29.1" \
    tests/integrations/test_common.py tests/integrations/test_sglang.py tests/integrations/test_sglang_corpus.py \
    tests/integrations/test_sglang_serving.py
