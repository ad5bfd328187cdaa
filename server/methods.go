package server

import (
	"context"
	"encoding/json"
	"reflect"
	"slices"
	"strings"

	"github.com/arborhq/arbor/agents/eval"
	"go.lsp.dev/protocol"
)

// Method is a request with its params type P and result type R. The typed values below are
// the one table of the arbor/* protocol: the daemon registers a handler for each with
// [register], which ties the handler's signature to P and R at compile time; the Go client
// calls them with [Method.Call]; and the generator (server/gen) writes the TypeScript and Lua
// mirrors from them.
type Method[P, R any] string

// Name returns the method's wire name.
func (m Method[P, R]) Name() string { return string(m) }

// Empty is the params or result of a method that takes or returns nothing.
type Empty struct{}

// The arbor/* requests.
var (
	SessionCreate    Method[SessionCreateParams, *Session]   = MethodSessionCreate
	Sessions         Method[SessionsParams, *SessionsResult] = MethodSessions
	SessionGet       Method[SessionRef, *Session]            = MethodSessionGet
	SessionAttach    Method[AttachParams, *AttachResult]     = MethodSessionAttach
	SessionDetach    Method[SessionRef, *Empty]              = MethodSessionDetach
	SessionLog       Method[LogParams, *LogResult]           = MethodSessionLog
	SessionSend      Method[SendParams, *SendResult]         = MethodSessionSend
	SessionStop      Method[SessionRef, *Session]            = MethodSessionStop
	SessionInterrupt Method[InterruptParams, *Session]       = MethodSessionInterrupt
	SessionSetModel  Method[SetModelParams, *Session]        = MethodSessionSetModel
	Models           Method[ModelsParams, *ModelsResult]     = MethodModels
	SessionFork      Method[ForkParams, *Session]            = MethodSessionFork
	SessionDiff      Method[DiffParams, *DiffResult]         = MethodSessionDiff
	SessionFileAt    Method[FileAtParams, *FileAtResult]     = MethodSessionFileAt
	SessionAccept    Method[AcceptParams, *AcceptResult]     = MethodSessionAccept
	SessionMerge     Method[MergeParams, *AcceptResult]      = MethodSessionMerge
	SessionReject    Method[RejectParams, *RejectResult]     = MethodSessionReject
	SessionConflicts Method[SessionRef, *ConflictsResult]    = MethodSessionConflicts
	SessionDiscard   Method[DiscardParams, *DiscardResult]   = MethodSessionDiscard
	DaemonStatus     Method[Empty, *DaemonStatusResult]      = MethodDaemonStatus
	DaemonStop       Method[Empty, *DaemonStatusResult]      = MethodDaemonStop
	TrustGet         Method[TrustParams, *TrustState]        = MethodTrustGet
	TrustGrant       Method[TrustGrantParams, *TrustState]   = MethodTrustGrant
	TrustRevoke      Method[TrustParams, *TrustState]        = MethodTrustRevoke
	Profiles         Method[ProfilesParams, *ProfilesResult] = MethodProfiles

	HarnessList     Method[HarnessListParams, *HarnessListResult]       = MethodHarnessList
	HarnessGet      Method[HarnessGetParams, *HarnessEntry]             = MethodHarnessGet
	HarnessPut      Method[HarnessPutParams, *HarnessWriteResult]       = MethodHarnessPut
	HarnessDelete   Method[HarnessDeleteParams, *HarnessWriteResult]    = MethodHarnessDelete
	HarnessHistory  Method[HarnessHistoryParams, *HarnessHistoryResult] = MethodHarnessHistory
	HarnessDiff     Method[HarnessDiffParams, *HarnessDiffResult]       = MethodHarnessDiff
	HarnessRollback Method[HarnessRollbackParams, *HarnessWriteResult]  = MethodHarnessRollback

	RefineRun       Method[RefineRunParams, *RefineRunResult] = MethodRefineRun
	RefineProposals Method[ProposalsParams, *ProposalsResult] = MethodRefineProposals
	RefineProposal  Method[ProposalRef, *Proposal]            = MethodRefineProposal
	RefineAccept    Method[ProposalDecideParams, *Proposal]   = MethodRefineAccept
	RefineReject    Method[ProposalDecideParams, *Proposal]   = MethodRefineReject

	GoalSet         Method[GoalSetParams, *Goal]                      = MethodGoalSet
	GoalGet         Method[GoalRef, *GoalResult]                      = MethodGoalGet
	GoalControl     Method[GoalControlParams, *Goal]                  = MethodGoalControl
	Progress        Method[ProgressParams, *ProgressResult]           = MethodProgress
	HeartbeatCreate Method[HeartbeatCreateParams, *Heartbeat]         = MethodHeartbeatCreate
	HeartbeatList   Method[HeartbeatListParams, *HeartbeatListResult] = MethodHeartbeatList
	HeartbeatDelete Method[HeartbeatID, *Heartbeat]                   = MethodHeartbeatDelete

	EvalRun     Method[EvalRunParams, *eval.Run]              = MethodEvalRun
	EvalResults Method[EvalResultsParams, *EvalResultsResult] = MethodEvalResults
	EvalCompare Method[EvalCompareParams, *eval.Comparison]   = MethodEvalCompare
	EvalStop    Method[EvalStopParams, *eval.Run]             = MethodEvalStop
)

// Notification is a daemon → client notification with its params type P.
type Notification[P any] string

// Name returns the notification's wire name.
func (n Notification[P]) Name() string { return string(n) }

// The arbor/* notifications.
var (
	EventNotification       Notification[Event]             = NotifyEvent
	SessionTreeNotification Notification[SessionTreeParams] = NotifySessionTree
	FellBehindNotification  Notification[FellBehindParams]  = NotifyFellBehind
)

// route is one entry of the daemon's method table.
type route struct {
	name           string
	params, result reflect.Type
	// long requests (git work) run under a context that $/cancelRequest cancels.
	cancellable bool
	serve       func(c *conn, ctx context.Context, raw json.RawMessage) (any, error)
}

// register ties a handler to its method: params are decoded into P, and the result is R.
func register[P, R any](m Method[P, R], h func(*conn, context.Context, P) (R, error)) route {
	return route{
		name: string(m), params: reflect.TypeFor[P](), result: reflect.TypeFor[R](),
		serve: func(c *conn, ctx context.Context, raw json.RawMessage) (any, error) {
			p, err := decode[P](raw)
			if err != nil {
				return nil, err
			}
			return h(c, ctx, p)
		},
	}
}

// cancellable marks a route whose work a client may cancel with $/cancelRequest.
func (r route) withCancel() route { r.cancellable = true; return r }

// routes is the one table of everything the daemon answers, LSP and arbor/*. It is built in
// init because workspace/executeCommand dispatches through it.
var routes map[string]route

func init() { routes = buildRoutes() }

func buildRoutes() map[string]route {
	m := map[string]route{}
	for _, r := range []route{
		register(Method[protocol.InitializeParams, *protocol.InitializeResult]("initialize"), (*conn).initialize),
		register(Method[Empty, *Empty]("shutdown"), (*conn).shutdownReq),
		register(Method[protocol.CodeActionParams, []protocol.CodeAction]("textDocument/codeAction"), (*conn).codeAction),
		register(Method[protocol.ExecuteCommandParams, any]("workspace/executeCommand"), (*conn).executeCommand),
		register(SessionCreate, (*conn).sessionCreate),
		register(Sessions, (*conn).sessions),
		register(SessionGet, (*conn).sessionGet),
		register(SessionAttach, (*conn).sessionAttach),
		register(SessionDetach, (*conn).sessionDetach),
		register(SessionLog, (*conn).sessionLog),
		register(SessionSend, (*conn).sessionSend),
		register(SessionStop, (*conn).sessionStop),
		register(SessionInterrupt, (*conn).sessionInterrupt),
		register(SessionSetModel, (*conn).sessionSetModel),
		register(Models, (*conn).models),
		register(SessionFork, (*conn).sessionFork).withCancel(),
		register(SessionDiff, (*conn).sessionDiff).withCancel(),
		register(SessionFileAt, (*conn).sessionFileAt).withCancel(),
		register(SessionAccept, (*conn).sessionAccept).withCancel(),
		register(SessionMerge, (*conn).sessionMerge).withCancel(),
		register(SessionReject, (*conn).sessionReject).withCancel(),
		register(SessionConflicts, (*conn).sessionConflicts).withCancel(),
		register(SessionDiscard, (*conn).sessionDiscard),
		register(DaemonStatus, (*conn).daemonStatus),
		register(DaemonStop, (*conn).daemonStop),
		register(TrustGet, (*conn).trustGet),
		register(TrustGrant, (*conn).trustGrant),
		register(TrustRevoke, (*conn).trustRevoke),
		register(Profiles, (*conn).profiles),
		register(HarnessList, (*conn).harnessList),
		register(HarnessGet, (*conn).harnessGet),
		register(HarnessPut, (*conn).harnessPut),
		register(HarnessDelete, (*conn).harnessDelete),
		register(HarnessHistory, (*conn).harnessHistory),
		register(HarnessDiff, (*conn).harnessDiff),
		register(HarnessRollback, (*conn).harnessRollback),
		register(RefineRun, (*conn).refineRun),
		register(RefineProposals, (*conn).refineProposals),
		register(RefineProposal, (*conn).refineProposal),
		register(RefineAccept, (*conn).refineAccept),
		register(RefineReject, (*conn).refineReject),
		register(GoalSet, (*conn).goalSet),
		register(GoalGet, (*conn).goalGet),
		register(GoalControl, (*conn).goalControl),
		register(Progress, (*conn).progressSeries),
		register(HeartbeatCreate, (*conn).heartbeatCreate),
		register(HeartbeatList, (*conn).heartbeatList),
		register(HeartbeatDelete, (*conn).heartbeatDelete),
		register(EvalRun, (*conn).evalRun),
		register(EvalResults, (*conn).evalResults),
		register(EvalCompare, (*conn).evalCompare),
		register(EvalStop, (*conn).evalStop),
	} {
		if _, dup := m[r.name]; dup {
			panic("server: method registered twice: " + r.name)
		}
		m[r.name] = r
	}
	return m
}

// MethodType describes one arbor/* request for the generator.
type MethodType struct {
	Name           string
	Params, Result reflect.Type
}

// NotificationType describes one arbor/* notification for the generator.
type NotificationType struct {
	Name   string
	Params reflect.Type
}

// ProtocolMethods lists the arbor/* requests of the method table, sorted by name.
func ProtocolMethods() []MethodType {
	var out []MethodType
	for _, r := range routes {
		if strings.HasPrefix(r.name, "arbor/") {
			out = append(out, MethodType{Name: r.name, Params: r.params, Result: r.result})
		}
	}
	slices.SortFunc(out, func(a, b MethodType) int { return strings.Compare(a.Name, b.Name) })
	return out
}

// ProtocolNotifications lists the arbor/* notifications.
func ProtocolNotifications() []NotificationType {
	return []NotificationType{
		notificationType(EventNotification),
		notificationType(SessionTreeNotification),
		notificationType(FellBehindNotification),
	}
}

func notificationType[P any](n Notification[P]) NotificationType {
	return NotificationType{Name: string(n), Params: reflect.TypeFor[P]()}
}
