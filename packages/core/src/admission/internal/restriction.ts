/**
 * A restriction plugin (NodeRestriction, MemberRestriction): a pure decision refusing a request
 * with 403, applied in the mutating phase already (before webhooks see the request) and again
 * when validating (DELETE only validates).
 */
import { Effect, Either } from "effect"
import type * as Admission from "../../api/Admission.js"
import * as ApiError from "../../api/ApiError.js"
import * as Status from "../../model/Status.js"

/** The plugin refusing what `decide` names a reason for. */
export const plugin = (name: string, decide: (request: Admission.Request) => string | undefined): Admission.Plugin => {
  const refuse = (request: Admission.Request): Either.Either<void, ApiError.ApiError> => {
    const detail = decide(request)
    return detail === undefined ? Either.void : Either.left(ApiError.of(Status.forbidden({ group: request.resource.group, resource: request.resource.plural }, request.name, detail)))
  }
  return { name, mutate: (request) => Effect.as(refuse(request), request.object), validate: (request) => Effect.as(refuse(request), []) }
}
