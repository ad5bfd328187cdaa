// Package refine is the model-independent half of /refine: it picks what a refinement looks
// at from a session's event log, writes the refiner's prompts, and reads the refiner's reply
// into validated harness edits. It calls no model and writes nothing; the daemon does both.
//
// Call [Select] with the session's records and the seq of the last refinement to get the
// [Trajectory]: the signals since then, chosen by event rather than as a text tail (failed
// cells and turns, retries, corrections from the user, long cells, the code of the cells that
// failed, a few replies for context), within a byte budget, as a Digest the refiner reads with
// each event tagged by its seq. Send [SystemPrompt] and [UserPrompt] to the refiner model,
// then call [Parse] on its reply:
//
//	t := refine.Select(recs, lastRefineSeq, refine.Options{})
//	reply := model(refine.SystemPrompt(), refine.UserPrompt(t, harness.Render(scopes, 0), focus, "session"))
//	r, err := refine.Parse(reply, t)
//	if err != nil { // once: ask again, naming what was wrong
//		reply = model(…, refine.RepairPrompt(err))
//		r, err = refine.Parse(reply, t)
//	}
//	// err != nil: record the refinement as rejected with err's text; errors.Is(err,
//	// refine.ErrBasePrompt) says the refiner tried to edit the base prompt.
//
// Parse tolerates what models wrap JSON in — prose, ```json fences, a bare array of edits, the
// field spellings models vary (intended_effect, triggers) — and is strict about what matters:
// each edit's entry passes [harness.Entry.Validate], its trigger cites only seqs the
// trajectory selected (so a proposal's trigger always points at events the refiner was
// shown), it says why and what it should change, the base prompt is never a target, and a reply
// holds at most [MaxEdits]. Its errors name the edit and the field, so the one repair request
// can quote them. What Parse accepts is not yet safe to apply: whether an edit weakens a test or
// touches what a verifier relies on is the gate's to decide, independently of this model.
package refine
