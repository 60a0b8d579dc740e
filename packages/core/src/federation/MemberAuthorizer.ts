/**
 * The hub's member authorizer (the Node authorizer's counterpart for member clusters): a member
 * identity (`system:member:<name>`, group `system:members`, from its client certificate) may
 *
 *   memberclusters/<name>, its status      get, watch, update, patch (its own entry only)
 *   memberclusters/<name>/tunnel           get (opening its tunnel, MemberTunnel)
 *   works in fleet-member-<name>           get, list, watch; works/status update, patch
 *   leases in fleet-member-<name>          get, create, update, patch (its heartbeat)
 *   events in fleet-member-<name>          create, patch
 *   certificatesigningrequests             create (a renewal), get, watch (its own by name)
 *
 * and nothing else: no RBAC role is bound to members, so whatever this authorizer does not allow
 * is denied. Another member's Work, another member's entry, Secrets, the hub's other namespaces:
 * 403 with the reason.
 */
import { Effect } from "effect"
import type * as Authz from "../api/Authz.js"
import * as Federation from "../model/Federation.js"

const allow: Authz.Decision = { allowed: true, reason: "" }
const deny = (reason: string): Authz.Decision => ({ allowed: false, reason })

const reads = ["get", "list", "watch"]
const writes = ["update", "patch"]

/** The decision for one request (pure); undefined when the user is not a member. */
export const decide = (a: Authz.Attributes): Authz.Decision | undefined => {
  const member = Federation.memberOf(a.user)
  if (member === undefined) return undefined
  if (!a.resourceRequest) return deny(`member "${member}" may not reach ${a.path}`)
  const own = Federation.memberNamespace(member)
  switch (`${a.apiGroup}/${a.resource}`) {
    case `${Federation.Group}/memberclusters`:
      if (a.name !== member) return deny(`member "${member}" may only reach its own MemberCluster`)
      if (a.subresource === "" && (a.verb === "get" || a.verb === "watch")) return allow
      if ((a.subresource === "" || a.subresource === "status") && writes.includes(a.verb)) return allow
      if (a.subresource === "tunnel" && a.verb === "get") return allow
      return deny(`member "${member}" may not ${a.verb} memberclusters${a.subresource === "" ? "" : `/${a.subresource}`}`)
    case `${Federation.Group}/works`:
      if (a.namespace !== own) return deny(`member "${member}" may only reach Works in ${own}`)
      if (a.subresource === "" && reads.includes(a.verb)) return allow
      if (a.subresource === "status" && writes.includes(a.verb)) return allow
      return deny(`member "${member}" may not ${a.verb} works${a.subresource === "" ? "" : `/${a.subresource}`}`)
    case "coordination.k8s.io/leases":
      if (a.namespace !== own) return deny(`member "${member}" may only reach leases in ${own}`)
      return ["get", "create", ...writes].includes(a.verb) ? allow : deny(`member "${member}" may not ${a.verb} leases`)
    case "/events":
    case "events.k8s.io/events":
      if (a.namespace !== own) return deny(`member "${member}" may only write events in ${own}`)
      return a.verb === "create" || a.verb === "patch" ? allow : deny(`member "${member}" may not ${a.verb} events`)
    case "certificates.k8s.io/certificatesigningrequests":
      if (a.subresource !== "") return deny(`member "${member}" may not ${a.verb} certificatesigningrequests/${a.subresource}`)
      if (a.verb === "create") return allow
      // Its own renewal requests are named after it (`member-<name>-<suffix>`).
      if ((a.verb === "get" || a.verb === "watch") && a.name.startsWith(`member-${member}-`)) return allow
      return deny(`member "${member}" may only read its own certificate signing requests`)
    default:
      return deny(`member "${member}" may not reach ${a.apiGroup === "" ? "" : `${a.apiGroup}/`}${a.resource}`)
  }
}

/** Members first (their requests end here), then `next` for everyone else. */
export const chain = (next: Authz.Authorizer): Authz.Authorizer => (a) => {
  const verdict = decide(a)
  return verdict === undefined ? next(a) : Effect.succeed(verdict)
}
