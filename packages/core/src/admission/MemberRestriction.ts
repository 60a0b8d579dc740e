/**
 * MemberRestriction admission, the hub's NodeRestriction for members: a member identity
 * (`system:member:<name>`, group `system:members`) may write what it reports — its MemberCluster's
 * status — but not what the hub decides about it: the spec (region, zone, the taints the hub's
 * health sets such as `unreachable:NoSchedule`, cordoning, the Push Secret), the labels placement
 * selects members by, and `status.certificate`, the hub's record of which certificates it accepts.
 * Otherwise a member could lift its own taints, draw workloads by relabelling itself, or keep an
 * old certificate alive. Refusals are 403, as NodeRestriction's.
 */
import type * as Admission from "../api/Admission.js"
import { plugin as restriction } from "./internal/restriction.js"
import * as Federation from "../model/Federation.js"
import { asObject, jsonEqual } from "../object/Json.js"

/** The plugin's name. */
export const name = "MemberRestriction"

/** The decision for one request (pure): `undefined` to allow, else the refusal's detail. */
export const decide = (request: Pick<Admission.Request, "operation" | "user" | "resource" | "subresource" | "object" | "oldObject">): string | undefined => {
  const member = Federation.memberOf(request.user)
  if (member === undefined || request.resource.group !== Federation.Group || request.resource.plural !== "memberclusters") return undefined
  if (request.operation !== "UPDATE" || request.oldObject === undefined) return undefined
  const now = request.object
  const before = request.oldObject
  if (request.subresource === "") {
    if (!jsonEqual(now["spec"] ?? {}, before["spec"] ?? {})) return `member "${member}" may not change its MemberCluster's spec (the hub's decisions about it)`
    if (!jsonEqual(asObject(now["metadata"])["labels"] ?? {}, asObject(before["metadata"])["labels"] ?? {})) return `member "${member}" may not change its MemberCluster's labels`
  }
  if (request.subresource === "status" && !jsonEqual(asObject(now["status"])["certificate"] ?? {}, asObject(before["status"])["certificate"] ?? {})) {
    return `member "${member}" may not change status.certificate (the hub's record of the certificates it accepts)`
  }
  return undefined
}

/** The plugin: refuses in the mutating phase already (before webhooks see the request), and again when validating (DELETE only validates). */
export const make = (): Admission.Plugin => restriction(name, decide)
