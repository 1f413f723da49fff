// Package idemecho wires the idempotency middleware into Echo v5: the
// route template of the fingerprint is Echo's route path ("/payments/:id",
// written "/payments/{id}"),
// and an error a handler returns is answered by Echo's error handler
// inside the middleware, so that its status decides what is recorded.
package idemecho

import (
	"net/http"

	idempotency "github.com/idempotency-pg/idempotency/clients/go"
	"github.com/labstack/echo/v5"
)

// Middleware is the idempotency middleware of namespace as an Echo
// middleware; use it with e.Use, on a group, or on a route.
func Middleware(c *idempotency.Client, namespace string, opts ...idempotency.Option) echo.MiddlewareFunc {
	mw := c.Middleware(namespace, opts...)
	return func(next echo.HandlerFunc) echo.HandlerFunc {
		return func(ec *echo.Context) error {
			req, res := ec.Request(), ec.Response()
			req.Pattern = ec.Path()                // the route template, as echo.WrapMiddleware passes it
			defer func() { ec.SetResponse(res) }() // also when the handler panics
			var handlerErr error
			mw(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				ec.SetRequest(r)
				ec.SetResponse(echo.NewResponse(w, ec.Echo().Logger))
				if handlerErr = next(ec); handlerErr != nil {
					ec.Echo().HTTPErrorHandler(ec, handlerErr)
				}
			})).ServeHTTP(res, req)
			// The error was answered (and recorded when it was a 4xx); Echo's
			// middlewares still see it, its error handler finds the response sent.
			return handlerErr
		}
	}
}
