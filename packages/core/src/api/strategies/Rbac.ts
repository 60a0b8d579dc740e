/** The `rbac.authorization.k8s.io` group (`pkg/registry/rbac`): rule and binding validation, the roleRef that may not change. */
import * as Rbac from "../../model/Rbac.js"
import type { JsonObject } from "../../object/Json.js"
import type { GroupStrategies } from "../Strategy.js"
import { immutable, neutral } from "./Rules.js"

const roleRefImmutable = (o: JsonObject, old: JsonObject) => immutable("roleRef", o["roleRef"], old["roleRef"])

/** The RBAC group's strategies (no columns beyond Age, no subresources). */
export const group: GroupStrategies = {
  strategies: {
    "rbac.authorization.k8s.io/v1/Role": { ...neutral, validate: (o) => Rbac.validateRules(o["rules"], true) },
    "rbac.authorization.k8s.io/v1/ClusterRole": { ...neutral, validate: (o) => Rbac.validateRules(o["rules"], false) },
    "rbac.authorization.k8s.io/v1/RoleBinding": {
      ...neutral,
      defaults: Rbac.defaultSubjects,
      validate: (o) => Rbac.validateBinding(o, true),
      validateUpdate: roleRefImmutable
    },
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
      ...neutral,
      defaults: Rbac.defaultSubjects,
      validate: (o) => Rbac.validateBinding(o, false),
      validateUpdate: roleRefImmutable
    }
  },
  columns: {},
  withStatus: [],
  scale: {},
  inAll: []
}
