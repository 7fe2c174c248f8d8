package sim

import (
	"fmt"
	"net/http"
	"strconv"
	"strings"
)

// errKind says which SGLang code path an error takes, which decides its
// status and body.
type errKind int

const (
	// kindValue is a Python ValueError inside generation: 400
	// {"error":{"message":…}} on /generate, an in-stream error chunk on a
	// /generate stream, and the OpenAI error shape on /v1/*.
	kindValue errKind = iota
	// kindType is an uncaught exception (TypeError) in /generate: 500 plain
	// "Internal Server Error", or a broken stream.
	kindType
	// kindValidation is a FastAPI request validation error: 400 with the
	// OpenAI error shape and type "Bad Request".
	kindValidation
	// kindHTTP is an HTTPException or an OpenAI-layer error: the OpenAI error
	// shape with errType and status.
	kindHTTP
)

// apiError is an error answer of the simulated server.
type apiError struct {
	kind    errKind
	status  int
	msg     string
	errType string // "type" of the OpenAI error shape
}

func (e *apiError) Error() string { return e.msg }

// valueError returns a Python ValueError with the given message.
func valueError(format string, args ...any) *apiError {
	return &apiError{kind: kindValue, status: http.StatusBadRequest, msg: fmt.Sprintf(format, args...), errType: "BadRequestError"}
}

// typeError returns an uncaught Python exception.
func typeError(msg string) *apiError {
	return &apiError{kind: kindType, status: http.StatusInternalServerError, msg: msg, errType: "InternalServerError"}
}

// httpError returns an error with the OpenAI shape.
func httpError(status int, errType, msg string) *apiError {
	return &apiError{kind: kindHTTP, status: status, msg: msg, errType: errType}
}

// fieldError is one entry of a pydantic validation error.
type fieldError struct {
	typ string
	loc []any // "body", field names and list indexes
	msg string
}

// validationError returns a FastAPI RequestValidationError remapped to 400,
// with a message shaped like str(exc) followed by str(exc.errors()).
func validationError(errs ...fieldError) *apiError {
	parts := make([]string, len(errs))
	for i, e := range errs {
		locs := make([]string, len(e.loc))
		for j, l := range e.loc {
			switch l := l.(type) {
			case int:
				locs[j] = strconv.Itoa(l)
			default:
				locs[j] = pyStr(fmt.Sprint(l))
			}
		}
		loc := strings.Join(locs, ", ")
		if len(locs) == 1 {
			loc += ","
		}
		parts[i] = fmt.Sprintf("{'type': %s, 'loc': (%s), 'msg': %s}", pyStr(e.typ), loc, pyStr(e.msg))
	}
	plural := "s"
	if len(errs) == 1 {
		plural = ""
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%d validation error%s:", len(errs), plural)
	for _, p := range parts {
		b.WriteString("\n  " + p)
	}
	b.WriteString(" [" + strings.Join(parts, ", ") + "]")
	return &apiError{kind: kindValidation, status: http.StatusBadRequest, msg: b.String(), errType: "Bad Request"}
}

// errorBody is the OpenAI-compatible error shape of SGLang's ErrorResponse.
type errorBody struct {
	Object  string  `json:"object"`
	Message string  `json:"message"`
	Type    string  `json:"type"`
	Param   *string `json:"param"`
	Code    int     `json:"code"`
}

// writeJSON writes v as JSON with the given status and Content-Length.
func writeJSON(w http.ResponseWriter, status int, v any) {
	writeRaw(w, status, "application/json", marshal(v))
}

// writeRaw writes body with the given status and content type.
func writeRaw(w http.ResponseWriter, status int, contentType string, body []byte) {
	h := w.Header()
	if contentType != "" {
		h.Set("Content-Type", contentType)
	}
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// writeOpenAIError writes e in the OpenAI error shape, whatever its kind.
func writeOpenAIError(w http.ResponseWriter, e *apiError) {
	writeJSON(w, e.status, errorBody{Object: "error", Message: e.msg, Type: e.errType, Code: e.status})
}

// writeInternalError writes Starlette's plain 500 answer.
func writeInternalError(w http.ResponseWriter) {
	writeRaw(w, http.StatusInternalServerError, "text/plain; charset=utf-8", []byte("Internal Server Error"))
}

// writeGenerateError writes e as the non-streaming /generate endpoint would.
func writeGenerateError(w http.ResponseWriter, e *apiError) {
	switch e.kind {
	case kindValue:
		writeJSON(w, http.StatusBadRequest, map[string]map[string]string{"error": {"message": e.msg}})
	case kindType:
		writeInternalError(w)
	default:
		writeOpenAIError(w, e)
	}
}

// writeDetail writes FastAPI's {"detail":…} answer, used for 404 and 405.
func writeDetail(w http.ResponseWriter, status int, detail string) {
	writeJSON(w, status, map[string]string{"detail": detail})
}
