/**
 * What the authorization endpoints ask of the authorizer: a decision (access reviews), the rules
 * a user holds in a namespace (rules reviews), and the namespaces a user reaches (accessible
 * namespaces). `fromIndex` answers from the RBAC index; `alwaysAllow` for `--authorization-mode AlwaysAllow`.
 */
import { Effect } from "effect"
import * as Policy from "./RbacRules.js"
import type { RbacIndex } from "./RbacIndex.js"
import type * as Authz from "../api/Authz.js"
import type { UserInfo } from "../api/Http.js"

/** The authorizer's answers, for the review and discovery endpoints. */
export interface Evaluator {
  readonly authorize: Authz.Authorizer
  /** The rules `user` holds in `namespace` (`""`: cluster-wide bindings only). */
  readonly rules: (user: UserInfo, namespace: string) => Policy.RuleSet
  /** The namespaces `user` reaches; `all` when the user may list every namespace. */
  readonly namespaces: (user: UserInfo) => { readonly all: boolean; readonly namespaces: ReadonlyArray<string> }
}

/** Answers from an RBAC index. */
export const fromIndex = (index: RbacIndex): Evaluator => ({
  authorize: index.authorize,
  rules: (user, namespace) => Policy.rulesFor(index.policy(), user, namespace),
  namespaces: (user) => Policy.namespacesFor(index.policy(), user)
})

/** Everything is allowed (no RBAC). */
export const alwaysAllow: Evaluator = {
  authorize: () => Effect.succeed({ allowed: true, reason: "" }),
  rules: () => ({ rules: [{ verbs: ["*"], apiGroups: ["*"], resources: ["*"] }, { verbs: ["*"], nonResourceURLs: ["*"] }], missing: [] }),
  namespaces: () => ({ all: true, namespaces: [] })
}
