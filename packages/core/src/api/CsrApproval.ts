/**
 * The `certificatesigningrequests/approval` subresource (`kubectl certificate approve|deny`): a PUT
 * of the whole request whose `status.conditions` are kept and nothing else; the stored spec,
 * metadata and issued certificate stay as they are. An Approved and a Denied condition together
 * are refused, and a decision once made is not taken back (as kube-apiserver). The resourceVersion
 * of the body, when given, must be the stored one (409 otherwise), so two approvers cannot both
 * believe they decided.
 */
import { Clock, Effect, Either } from "effect"
import * as FieldError from "../model/FieldError.js"
import * as Status from "../model/Status.js"
import { asArray, asObject, asString } from "../object/Json.js"
import * as Keys from "../store/Keys.js"
import type { SubresourceHandler } from "./ApiServer.js"
import * as ApiError from "./ApiError.js"
import * as Body from "./Body.js"
import { json } from "./Http.js"
import * as Objects from "./Objects.js"

const group = "certificates.k8s.io"
const plural = "certificatesigningrequests"
const fromEither = <A>(e: Either.Either<A, ApiError.ApiError>): Effect.Effect<A, ApiError.ApiError> => (Either.isRight(e) ? Effect.succeed(e.right) : Effect.fail(e.left))

const decided = (conditions: ReadonlyArray<Record<string, unknown>>, type: string) => conditions.some((c) => c["type"] === type && c["status"] === "True")

/** The approval subresource handler (GET answers the request, PUT decides). */
export const handler: SubresourceHandler = {
  group,
  plural,
  subresource: "approval",
  handle: (request, route, context) =>
    Effect.gen(function* () {
      const name = route.name ?? ""
      const key = Keys.object({ group, resource: plural, name })
      const subject = { group, resource: plural, name }
      const kv = yield* context.store.get(key).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
      const stored = Objects.fromStored({ value: context.transformer.fromStore(context.resource, kv.value), modRevision: kv.modRevision })
      const method = request.method.toUpperCase()
      if (method === "GET") return json(200, stored)
      if (method !== "PUT") return yield* Effect.fail(ApiError.of(Status.methodNotSupported({ group, resource: `${plural}/approval` }, request.method.toLowerCase())))
      const body = yield* fromEither(Either.flatMap(Body.parse(request.body, request.headers["content-type"]), Body.asObject))
      const rv = asString(asObject(body["metadata"])["resourceVersion"])
      if (rv !== "" && rv !== String(kv.modRevision)) {
        return yield* Effect.fail(ApiError.of(Status.conflict({ group, resource: plural }, name, "the object has been modified; please apply your changes to the latest version and try again")))
      }
      const now = Objects.timestamp(yield* Clock.currentTimeMillis)
      const conditions: ReadonlyArray<Record<string, unknown>> = asArray(asObject(body["status"])["conditions"]).map((c) => ({ lastUpdateTime: now, lastTransitionTime: now, ...asObject(c) }))
      const errors: Array<FieldError.FieldError> = []
      for (const [i, c] of conditions.entries()) {
        if (!["Approved", "Denied", "Failed"].includes(asString(c["type"]))) errors.push(FieldError.notSupported(`status.conditions[${i}].type`, c["type"], ["Approved", "Denied", "Failed"]))
        if (!["True", "False", "Unknown"].includes(asString(c["status"]))) errors.push(FieldError.notSupported(`status.conditions[${i}].status`, c["status"], ["False", "True", "Unknown"]))
      }
      if (decided(conditions, "Approved") && decided(conditions, "Denied")) errors.push(FieldError.invalid("status.conditions", "Approved,Denied", "Approved and Denied conditions are mutually exclusive"))
      const before = asArray(asObject(stored["status"])["conditions"]).map(asObject)
      for (const t of ["Approved", "Denied"]) if (decided(before, t) && !decided(conditions, t)) errors.push(FieldError.forbidden("status.conditions", `updates may not remove a condition of type "${t}"`))
      if (errors.length > 0) return yield* Effect.fail(ApiError.of(Status.invalid({ group, kind: "CertificateSigningRequest" }, name, errors)))
      const next = { ...stored, status: { ...asObject(stored["status"]), conditions } }
      const text = yield* fromEither(Objects.toStored(next))
      const written = yield* context.store.update(key, context.transformer.toStore(context.resource, text), kv.modRevision).pipe(Effect.mapError((e) => ApiError.fromStore(e, subject)))
      return json(200, Objects.fromStored({ value: text, modRevision: written.modRevision }))
    })
}
