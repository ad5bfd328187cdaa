package server

// The session controls an ACP client needs besides a message: a model switch, the models to
// pick from, and an interrupt of the running turn (arbor acp's set_model and cancel).

// SetModelParams switches a session's model to Model, a name from arbor/models.
type SetModelParams struct {
	ID    string `json:"id"`
	Model string `json:"model"`
}

// ModelsParams names a repository by any directory inside it ("" = the client's root).
type ModelsParams struct {
	Dir string `json:"dir,omitempty"`
}

// ModelInfo is one configured model: Name is what sessions and arbor.json call it, Model the
// endpoint's own id.
type ModelInfo struct {
	Name  string `json:"name"`
	Model string `json:"model"`
}

// ModelsResult lists the models a session of the repository can run with, and the default
// ("" when none is set and several are configured).
type ModelsResult struct {
	Models  []ModelInfo `json:"models"`
	Default string      `json:"default,omitempty"`
}

// InterruptParams cuts a session's running turn short. Turn, when set, cuts only that turn
// (a cancel arriving after it ended leaves the next alone); Tree cuts the turns its
// descendants run too.
type InterruptParams struct {
	ID   string `json:"id"`
	Turn int    `json:"turn,omitempty"`
	Tree bool   `json:"tree,omitempty"`
}
