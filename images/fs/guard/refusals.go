package guard

import "net/http"

// reply is how fs answers a refusal of one reason: the HTTP status and error type of its JSON
// API, and the text the agent is told when the refusal site has nothing more specific to say.
type reply struct {
	status    int
	typ, text string
}

// refusals is fs's one table of refusals. Policy decisions are 403 permission_error; a path that
// is missing, taken or not empty is 404 or 409, so that a client can tell a conflict from a
// refusal.
var refusals = map[Reason]reply{
	ReasonBadJSON:       {http.StatusBadRequest, "invalid_request_error", "the body must be a JSON object"},
	ReasonBadField:      {http.StatusBadRequest, "invalid_request_error", "a field is missing, unknown, or of the wrong type"},
	ReasonBadPath:       {http.StatusForbidden, "permission_error", "the path is not a clean relative path"},
	ReasonNotProtected:  {http.StatusForbidden, "permission_error", "the path is not a protected path: write it directly in /workspace"},
	ReasonProtectedRoot: {http.StatusForbidden, "permission_error", "a protected path itself is never deleted, renamed or replaced"},
	ReasonApproval:      {http.StatusForbidden, "permission_error", "the change needs a person's approval (business.fs.ask), and none was asked for"},
	ReasonTooLarge:      {http.StatusRequestEntityTooLarge, "request_too_large", "the content is larger than business.fs.max_file_size"},
	ReasonMode:          {http.StatusForbidden, "permission_error", "fs does not set that mode"},
	ReasonSecret:        {http.StatusForbidden, "permission_error", "the content matches a secret filter rule; fs does not write secrets into protected paths"},
	ReasonSymlink:       {http.StatusForbidden, "permission_error", "the path goes through a symbolic link; fs never follows one"},
	ReasonMount:         {http.StatusForbidden, "permission_error", "the path crosses into another mount"},
	ReasonWrongType:     {http.StatusForbidden, "permission_error", "a file is where a folder is expected, or the reverse"},
	ReasonNotFound:      {http.StatusNotFound, "not_found_error", "no such file or folder"},
	ReasonExists:        {http.StatusConflict, "conflict_error", "the destination exists; rename never replaces"},
	ReasonNotEmpty:      {http.StatusConflict, "conflict_error", "the folder is not empty; delete its entries first"},
	ReasonTooMany:       {http.StatusForbidden, "permission_error", "the protected folders hold their maximum of entries"},
	ReasonIO:            {http.StatusInternalServerError, "api_error", "fs failed"},
	ReasonAudit:         {http.StatusServiceUnavailable, "api_error", "fs cannot write its audit log, so it changes nothing: the person must free fs's audit volume and restart fs"},
	// The gate's verdicts: their text ends the message of a change that was not approved.
	ReasonDenied:      {http.StatusForbidden, "permission_error", "the operator denied it"},
	ReasonTimeout:     {http.StatusForbidden, "permission_error", "no decision came in time"},
	ReasonMismatch:    passedOn, // as the gate finds it; fs's own (granted) names the file that changed
	ReasonUnavailable: {http.StatusForbidden, "permission_error", "fs cannot ask anyone (it has no approval gate, or the gate failed)"},
}

// passedOn is how fs answers the gate's other reasons, which it passes on unchanged
// (approval_bad_signature, ...): as a policy decision, whose cause is in the log.
var passedOn = reply{http.StatusForbidden, "permission_error", "the decision did not hold (the cause is in fs's log)"}

func (r Reason) reply() reply {
	if x, ok := refusals[r]; ok {
		return x
	}
	return passedOn
}

// Status is the HTTP status and error type fs answers a refusal of r with.
func (r Reason) Status() (int, string) { x := r.reply(); return x.status, x.typ }

// Text is r's public text: what the agent is told when a refusal has nothing more specific.
func (r Reason) Text() string { return r.reply().text }
