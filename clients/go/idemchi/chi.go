// Package idemchi wires the idempotency middleware into chi: the route
// template of the fingerprint is chi's route pattern ("/payments/{id}").
package idemchi

import (
	"net/http"

	"github.com/go-chi/chi/v5"
	idempotency "github.com/idempotency-pg/idempotency/clients/go"
)

// Middleware is the idempotency middleware of namespace with chi's route
// pattern as the template; use it with r.Use, r.With or in a group.
func Middleware(c *idempotency.Client, namespace string, opts ...idempotency.Option) func(http.Handler) http.Handler {
	return c.Middleware(namespace, append([]idempotency.Option{idempotency.Route(RoutePattern)}, opts...)...)
}

// RoutePattern is the pattern chi matches for r ({id:[0-9]+} written {id},
// * written {*}: idempotency.Template), found from the router at
// the root of the request's chi context, so that it is known in a
// middleware that runs before routing (r.Use) as in one that runs after
// (r.With); the request's path when no route matches.
func RoutePattern(r *http.Request) string {
	if rctx := chi.RouteContext(r.Context()); rctx != nil && rctx.Routes != nil {
		path := r.URL.RawPath
		if path == "" {
			path = r.URL.Path
		}
		if pattern := rctx.Routes.Find(chi.NewRouteContext(), r.Method, path); pattern != "" {
			return idempotency.Template(pattern)
		}
	}
	return idempotency.RouteTemplate(r)
}
