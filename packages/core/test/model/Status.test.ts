import { Either } from "effect"
import { describe, expect, it } from "vitest"
import { Decode, FieldError, Status } from "../../src/model/index.js"

describe("Status constructors (kube-apiserver wording)", () => {
  it.each([
    [Status.notFound("pods", "x"), 404, "NotFound", 'pods "x" not found'],
    [Status.notFound({ group: "apps", resource: "deployments" }, "web"), 404, "NotFound", 'deployments.apps "web" not found'],
    [Status.alreadyExists("pods", "x"), 409, "AlreadyExists", 'pods "x" already exists'],
    [
      Status.conflict("pods", "x"),
      409,
      "Conflict",
      'Operation cannot be fulfilled on pods "x": the object has been modified; please apply your changes to the latest version and try again'
    ],
    [Status.badRequest("bad"), 400, "BadRequest", "bad"],
    [Status.unauthorized(), 401, "Unauthorized", "Unauthorized"],
    [
      Status.forbidden("pods", "x", 'User "bob" cannot get resource "pods" in API group "" in the namespace "default"'),
      403,
      "Forbidden",
      'pods "x" is forbidden: User "bob" cannot get resource "pods" in API group "" in the namespace "default"'
    ],
    [Status.forbidden("pods", "", "nope"), 403, "Forbidden", "pods is forbidden: nope"],
    [Status.methodNotSupported("pods", "patch"), 405, "MethodNotAllowed", 'patch is not supported on resources of kind "pods"'],
    [Status.gone("gone"), 410, "Gone", "gone"],
    [Status.tooOldResourceVersion(5, 90), 410, "Expired", "too old resource version: 5 (90)"],
    [Status.requestEntityTooLarge("limit is 3145728"), 413, "RequestEntityTooLarge", "Request entity too large: limit is 3145728"],
    [Status.tooManyRequests("slow down", 1), 429, "TooManyRequests", "slow down"],
    [Status.internalError("boom"), 500, "InternalError", "Internal error occurred: boom"],
    [Status.serviceUnavailable("store down"), 503, "ServiceUnavailable", "store down"],
    [Status.timeout("request did not complete within 60s", 2), 504, "Timeout", "Timeout: request did not complete within 60s"],
    [
      Status.unsupportedMediaType(["application/json", "application/yaml"]),
      415,
      "UnsupportedMediaType",
      "the body of the request was in an unknown format - accepted media types include: application/json, application/yaml"
    ],
    [Status.notAcceptable(["application/json"]), 406, "NotAcceptable", "only the following media types are accepted: application/json"]
  ])("%#: %d %s", (status, code, reason, message) => {
    expect(status).toMatchObject({ kind: "Status", apiVersion: "v1", status: "Failure", code, reason, message })
    expect(Status.codeFor[reason as Status.StatusReason]).toBe(code)
    // Every constructed Status is itself a valid Status object.
    expect(Either.isRight(Decode.decodeObject(Status.Status, status, { strict: true }))).toBe(true)
  })

  it("names the resource in details, as clients expect", () => {
    expect(Status.notFound({ group: "apps", resource: "deployments" }, "web").details).toEqual({
      name: "web",
      group: "apps",
      kind: "deployments"
    })
    expect(Status.tooManyRequests("x", 3).details).toEqual({ retryAfterSeconds: 3 })
  })

  it("invalid: one error inline, several bracketed, one cause each", () => {
    const one = Status.invalid("Pod", "x", [FieldError.required("spec.containers[0].image")])
    expect(one).toMatchObject({
      code: 422,
      reason: "Invalid",
      message: 'Pod "x" is invalid: spec.containers[0].image: Required value',
      details: {
        name: "x",
        kind: "Pod",
        causes: [{ reason: "FieldValueRequired", message: "Required value", field: "spec.containers[0].image" }]
      }
    })
    const two = Status.invalid({ group: "apps", kind: "Deployment" }, "web", [
      FieldError.invalid("spec.replicas", -1, "must be greater than or equal to 0"),
      FieldError.notSupported("spec.strategy.type", "Blue", ["RollingUpdate", "Recreate"])
    ])
    expect(two.message).toBe(
      'Deployment.apps "web" is invalid: [spec.replicas: Invalid value: -1: must be greater than or equal to 0, spec.strategy.type: Unsupported value: "Blue": supported values: "RollingUpdate", "Recreate"]'
    )
    expect(two.details?.causes?.map((c) => c.reason)).toEqual(["FieldValueInvalid", "FieldValueNotSupported"])
    expect(two.details?.group).toBe("apps")
    expect(Status.invalid("Pod", "x", []).message).toBe('Pod "x" is invalid')
  })

  it("rejects a Status with an unknown reason", () => {
    const r = Decode.decodeObject(Status.Status, { kind: "Status", apiVersion: "v1", reason: "Oops" })
    expect(Either.isLeft(r) && r.left[0]?.path).toBe("reason")
  })
})
