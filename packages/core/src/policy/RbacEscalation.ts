/**
 * RBAC privilege-escalation prevention, as an admission plugin (Kubernetes does it in the RBAC
 * registry): a user may write a Role or ClusterRole only with rules it already holds (or the
 * `escalate` verb), and a binding only to a role whose rules it holds (or the `bind` verb on that
 * role). Without it, anyone allowed to write RoleBindings in a namespace could grant themselves
 * `cluster-admin` there.
 */
import { Effect } from "effect"
import type * as Admission from "../api/Admission.js"
import * as ApiError from "../api/ApiError.js"
import * as RbacModel from "../model/Rbac.js"
import * as Status from "../model/Status.js"
import * as Rbac from "./RbacRules.js"
import { asObject } from "../object/Json.js"


const describeRule = (r: Rbac.Rule) =>
  (r.nonResourceURLs ?? []).length > 0
    ? `{NonResourceURLs:${JSON.stringify(r.nonResourceURLs)}, Verbs:${JSON.stringify(r.verbs)}}`
    : `{APIGroups:${JSON.stringify(r.apiGroups ?? [])}, Resources:${JSON.stringify(r.resources ?? [])}${(r.resourceNames ?? []).length > 0 ? `, ResourceNames:${JSON.stringify(r.resourceNames)}` : ""}, Verbs:${JSON.stringify(r.verbs)}}`

/** The escalation check over the policy `policy()` returns. */
export const plugin = (policy: () => Rbac.Policy): Admission.Plugin => ({
  name: "RBACEscalation",
  validate: (request) =>
    Effect.suspend(() => {
      const r = request.resource
      if (r.group !== RbacModel.Group || request.operation === "DELETE" || request.subresource !== "") return Effect.succeed([])
      const user = request.user
      if (user.groups.includes(Rbac.mastersGroup)) return Effect.succeed([])
      const p = policy()
      const namespace = r.namespaced ? request.namespace : ""
      const may = (verb: string, resource: string, name: string) =>
        Rbac.authorize(p, { user, verb, resourceRequest: true, apiGroup: RbacModel.Group, resource, subresource: "", namespace, name, path: "" }).allowed
      const deny = (detail: string) =>
        Effect.fail(ApiError.of(Status.forbidden({ group: r.group, resource: r.plural }, request.name, detail)))
      const who = `user ${JSON.stringify(user.name)} (groups=${JSON.stringify(user.groups)})`
      const held = Rbac.rulesFor(p, user, namespace).rules
      const check = (servant: ReadonlyArray<Rbac.Rule>) => {
        const missing = Rbac.uncovered(held, servant)
        return missing.length === 0
          ? Effect.succeed([])
          : deny(`${who} is attempting to grant RBAC permissions not currently held:\n${missing.map(describeRule).join("\n")}`)
      }
      const o = request.object
      if (r.kind === "Role" || r.kind === "ClusterRole") {
        if (may("escalate", r.plural, request.name)) return Effect.succeed([])
        if (o["aggregationRule"] !== undefined && o["aggregationRule"] !== null) return deny(`${who} must have cluster-admin privileges to use the aggregationRule`)
        return check(Rbac.roleFromJson(o)?.rules ?? [])
      }
      if (r.kind === "RoleBinding" || r.kind === "ClusterRoleBinding") {
        const ref = asObject(o["roleRef"])
        const kind = String(ref["kind"] ?? "")
        const name = String(ref["name"] ?? "")
        if (may("bind", kind === "Role" ? "roles" : "clusterroles", name)) return Effect.succeed([])
        const rules = p.roles.get(Rbac.roleKey(kind, namespace, name))
        if (rules === undefined) return deny(`${who} cannot bind ${kind} ${JSON.stringify(name)}: it does not exist`)
        return check(rules)
      }
      return Effect.succeed([])
    })
})
