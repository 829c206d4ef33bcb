// Starts Swagger UI on the service's own OpenAPI document (a file, not an inline script, so
// that the page keeps to a Content-Security-Policy of 'self').
window.ui = SwaggerUIBundle({
  url: "/openapi.json",
  dom_id: "#swagger-ui",
  deepLinking: true,
  persistAuthorization: true,
});
