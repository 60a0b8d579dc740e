/**
 * The server's authorization (DESIGN §10): the Node authorizer, then RBAC with default deny. At start it writes the bootstrap
 * policy (built-in ClusterRoles and ClusterRoleBindings, idempotently), follows every RBAC object
 * in an in-memory index, and contributes the authorizer, the review and accessible-namespaces
 * endpoints, and the privilege-escalation admission check.
 * `--authorization-mode AlwaysAllow` turns RBAC off (development only).
 */
import { BootstrapPolicy, NodeAuthorizer, RbacApi, RbacEscalation, RbacIndex } from "@koder/fleet-core"
import { Effect, Schedule, type Scope } from "effect"
import type { Context, Contribution } from "./Context.js"

/** `--authorization-mode`: `RBAC` (default) or `AlwaysAllow`. */
export const mode = (flags: Context["flags"]): "RBAC" | "AlwaysAllow" | undefined => {
  const value = flags["authorization-mode"]
  if (value === undefined || value === "" || value === "RBAC") return "RBAC"
  return value === "AlwaysAllow" ? "AlwaysAllow" : undefined
}

/** Build this component. */
export const make = (context: Context): Effect.Effect<Contribution, never, Scope.Scope> =>
  Effect.gen(function* () {
    const chosen = mode(context.flags)
    if (chosen === "AlwaysAllow") {
      RbacApi.install(context.registry, RbacApi.Evaluator.alwaysAllow, context.store)
      return {
        authorize: RbacApi.Evaluator.alwaysAllow.authorize,
        banner: ["WARNING: --authorization-mode AlwaysAllow: every authenticated user may do anything"]
      }
    }
    // Writing the policy can fail only when the store does; keep retrying rather than serve without it.
    yield* BootstrapPolicy.ensure(context.store).pipe(
      Effect.tapError((e) => Effect.logWarning(`bootstrap RBAC policy: ${e.message}; retrying`)),
      Effect.retry({ times: 10, schedule: Schedule.exponential("100 millis") }),
      Effect.catchAll(() => Effect.logError("bootstrap RBAC policy could not be written; only system:masters is authorized"))
    )
    const index = yield* RbacIndex.make(context.store)
    // kube-apiserver's `--authorization-mode Node,RBAC`: a node's reads of Secrets, ConfigMaps,
    // claims and tokens are decided by its pods first; reviews answer through the same chain.
    const nodes = yield* NodeAuthorizer.make(context.store)
    const authorize = NodeAuthorizer.chain(nodes.authorize, index.authorize)
    RbacApi.install(context.registry, { ...RbacApi.Evaluator.fromIndex(index), authorize }, context.store)
    return {
      authorize,
      admission: [RbacEscalation.plugin(index.policy)],
      ...(chosen === undefined ? { banner: [`unknown --authorization-mode ${JSON.stringify(context.flags["authorization-mode"])}; using RBAC`] } : {})
    }
  })
