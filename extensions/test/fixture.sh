# Shared by the editor tests (extensions/nvim/test/run.sh, extensions/vscode/scripts/e2e.sh):
# the small repository a test session works in, and the scripted model it talks to. Source it;
# the caller defines fail() and cleans up $FAKE_PID.

# arbor_fixture_repo DIR: a git repository with one commit holding calc.py.
arbor_fixture_repo() {
  local repo=$1
  mkdir -p "$repo"
  git -C "$repo" init -q -b main
  git -C "$repo" config user.email test@example.invalid
  git -C "$repo" config user.name "arbor test"
  printf 'def add(a, b):\n    return a + b\n' > "$repo/calc.py"
  git -C "$repo" add . && git -C "$repo" commit -q -m init
}

# arbor_fixture_model DIR: starts `arbor fake-model` ($ARBOR_BIN) on a script in which turn 1 of
# "add one and one" starts a subagent with rlm(), writes sum.txt and prints 1+1, then the model
# answers "the sum is two"; turn 1 of "write the team rules" writes two notes to the workspace
# harness (proposals, under the default review policy); a goal "write done.txt" makes the
# session write done.txt and claim the goal (goal.complete); "stream a count" starts a helper, writes
# count.txt and prints a timestamp every 250 ms for 3 s; "many cells" runs 1000 cells that print to
# stdout and stderr (a 5,000-event session, with maxTurnSteps raised); the cell of "import a missing
# module" fails, and a refine with the focus "missing imports" proposes a note citing that failure
# (that rule comes first: a refiner's prompt quotes the session's task, which the task rules match).
# Tasks starting "view " are the VS Code views test's (e2e/views.e2e.js, whose 5,000-event session
# is a "many cells" one): a cell printing a timestamp every 100 ms once the file go appears, a turn
# with a subagent and a file, a session-scope note written twice, 199 subagents. A task or message
# that says "arbor-test-py HEX" runs the Python code HEX encodes (a test's own steps, kept in its
# own file). Sets FAKE_PID and URL; files go to DIR.
arbor_fixture_model() {
  local dir=$1
  cat > "$dir/script.json" <<'JSON'
{
  "rules": [
    {"when": {"system": "You refine the harness", "last": "(?s)Focus given by the user: missing imports.*\\[seq (\\d+) tool_finished error"},
     "text": "{\"summary\":\"imports fail\",\"edits\":[{\"op\":\"create\",\"entry\":{\"kind\":\"note\",\"id\":\"check-imports\",\"title\":\"Check imports\",\"body\":\"Before importing a module, check it is installed.\"},\"trigger\":[{{last.1}}],\"rationale\":\"the import failed\",\"intended\":\"no failed imports\"}]}"},
    {"when": {"last": "arbor-test-py ([0-9a-f]+)"}, "code": "exec(bytes.fromhex('{{last.1}}').decode())"},
    {"when": {"task": "stream a count", "turn": 1},
     "code": "h = await rlm('help with the count', name='helper')\nopen('count.txt', 'w').write('12\\n')\nimport time, sys\nfor i in range(12):\n    print(f't={time.time():.6f}', flush=True)\n    if i % 4 == 3:\n        print(f'warn {i}', file=sys.stderr, flush=True)\n    time.sleep(0.25)\n40 + 2"},
    {"when": {"task": "help with the count"}, "text": "helped"},
    {"when": {"task": "many cells", "last": "^n=1000\\b"}, "text": "done many"},
    {"when": {"task": "many cells"}, "code": "import sys\nn = globals().get('n', 0) + 1\nprint(f'n={n}')\nprint(n, file=sys.stderr)"},
    {"when": {"task": "import a missing module", "turn": 1}, "code": "import no_such_module_xyz"},
    {"when": {"task": "^view streamed output", "turn": 1},
     "code": "import os, time\nfor _ in range(1200):\n    if os.path.exists('go'):\n        break\n    time.sleep(0.1)\nfor i in range(40):\n    print(f'tick {time.time():.3f}', flush=True)\n    time.sleep(0.1)"},
    {"when": {"task": "^view a turn", "turn": 1},
     "code": "h = await rlm('view the kid', name='kid')\nopen('view.txt', 'w').write('v\\n')\nprint('wrote view.txt')"},
    {"when": {"task": "^view many subagents", "turn": 1},
     "code": "for i in range(199):\n    await rlm(f'view leaf {i}', name=f'leaf{i}')\nprint('spawned 199')"},
    {"when": {"task": "^view the harness", "turn": 1},
     "code": "await harness.notes.create('plan', 'The plan', body='first version')\nawait harness.notes.update('plan', body='second version')\nprint('noted')"},
    {"when": {"task": "add one and one", "turn": 1},
     "code": "h = await rlm('write the tests', name='tests')\nopen('sum.txt', 'w').write(str(1+1) + '\\n')\nprint(1+1)"},
    {"when": {"task": "write the tests"}, "text": "tests written"},
    {"when": {"task": "write the team rules", "turn": 1},
     "code": "await harness.notes.create('team-rule', 'Team rule', body='Run the tests.', scope='workspace')\nawait harness.notes.create('style-rule', 'Style rule', body='Keep functions short.', scope='workspace')"},
    {"when": {"last": "Keep working toward the goal: write done.txt"},
     "code": "open('done.txt', 'w').write('done\\n')\nawait goal.complete(evidence='done.txt written')"}
  ],
  "default": {"text": "the sum is two"}
}
JSON
  "$ARBOR_BIN" fake-model --script "$dir/script.json" --addr 127.0.0.1:0 > "$dir/fake.out" 2> "$dir/fake.err" &
  FAKE_PID=$!
  for _ in $(seq 100); do [ -s "$dir/fake.out" ] && break; sleep 0.1; done
  URL=$(head -1 "$dir/fake.out" | tr -d '\r')
  case "$URL" in http*) ;; *) fail "arbor fake-model printed no URL: $(cat "$dir/fake.out" "$dir/fake.err")";; esac
}
