#!/usr/bin/env bash
# SGLang step: chatparse's SGLang plugin tested on SGLang 0.5.23's own classes, CPU-only, in its own venv.
# Run from the repository root: .ci/steps/sglang.sh   (called by .ci/run; prints its own elapsed time)
#
# Install (engine-step.bash): CPU torch, then --no-deps from the exact pins of sglang-requirements.txt:
# SGLang without its own pins, what its parser code imports (sglang/__init__ imports triton and
# IPython), XGrammar (SGLang's grammar backend: the forced-call tests compile the attached
# constraint with it), and the test tools.
set -euo pipefail
source .ci/steps/engine-step.bash
engine_step sglang .ci/steps/sglang-requirements.txt CHATPARSE_REQUIRE_SGLANG \
    tests/integrations/test_common.py tests/integrations/test_sglang.py tests/integrations/test_sglang_corpus.py
