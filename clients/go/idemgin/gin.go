// Package idemgin wires the idempotency middleware into Gin: the route
// template of the fingerprint is Gin's full path ("/payments/:id", written
// "/payments/{id}"), and
// what the handlers after it write goes through the middleware's buffer.
package idemgin

import (
	"net/http"

	"github.com/gin-gonic/gin"
	idempotency "github.com/idempotency-pg/idempotency/clients/go"
)

// Middleware is the idempotency middleware of namespace as a Gin
// handler; use it with r.Use, on a group, or before a route's handler.
func Middleware(c *idempotency.Client, namespace string, opts ...idempotency.Option) gin.HandlerFunc {
	mw := c.Middleware(namespace, opts...)
	return func(gc *gin.Context) {
		original := gc.Writer
		defer func() { gc.Writer = original }() // also when a handler panics: gin.Recovery answers on the real writer
		gc.Request.Pattern = gc.FullPath()
		mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			gc.Request = r
			buffered := &writer{ResponseWriter: original, w: w, size: -1}
			gc.Writer = buffered
			gc.Next()
			buffered.WriteHeaderNow()
		})).ServeHTTP(original, gc.Request)
		gc.Abort() // a replay, 409, 400 or 503 ran no handler, and none may run now
	}
}

// writer is gin's ResponseWriter over the middleware's buffer: status,
// headers and body go to w; hijacking, flushing and pushing are the
// original writer's.
type writer struct {
	gin.ResponseWriter
	w      http.ResponseWriter
	status int
	size   int // -1 until the header is written, as gin counts
}

// Header is the buffer's header.
func (b *writer) Header() http.Header { return b.w.Header() }

// WriteHeader keeps the status until the body or the end writes it, as gin does.
func (b *writer) WriteHeader(code int) {
	if code > 0 && !b.Written() {
		b.status = code
	}
}

// WriteHeaderNow writes the status kept (200 by default) once.
func (b *writer) WriteHeaderNow() {
	if !b.Written() {
		b.size = 0
		b.w.WriteHeader(b.Status())
	}
}

// Write writes the status first, as gin does, then data to the buffer.
func (b *writer) Write(data []byte) (int, error) {
	b.WriteHeaderNow()
	n, err := b.w.Write(data)
	b.size += n
	return n, err
}

// WriteString is Write of a string.
func (b *writer) WriteString(s string) (int, error) { return b.Write([]byte(s)) }

// Status is the status kept or written (200 by default).
func (b *writer) Status() int {
	if b.status == 0 {
		return http.StatusOK
	}
	return b.status
}

// Size counts the body bytes written (-1 before the header).
func (b *writer) Size() int { return b.size }

// Written tells whether the header was written.
func (b *writer) Written() bool { return b.size != -1 }
