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
# session write done.txt and claim the goal (goal.complete). Sets FAKE_PID and URL; files go to DIR.
arbor_fixture_model() {
  local dir=$1
  cat > "$dir/script.json" <<'JSON'
{
  "rules": [
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
