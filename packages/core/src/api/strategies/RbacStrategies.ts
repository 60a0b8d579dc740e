/** The `rbac.authorization.k8s.io` group (`pkg/registry/rbac`): rule and binding validation, the roleRef that may not change. */
import * as Rbac from "../../model/Rbac.js"
import type { JsonObject } from "../../object/Json.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { immutable, neutral } from "./Rules.js"

const roleRefImmutable = (o: JsonObject, old: JsonObject) => immutable("roleRef", o["roleRef"], old["roleRef"])

/** The RBAC group's strategies (no columns beyond Age, no subresources). */
export const group: GroupStrategies = {
  strategies: {
    "rbac.authorization.k8s.io/v1/Role": { ...neutral, validate: (o) => Rbac.validateRules(Views.role(o).rules, true) },
    "rbac.authorization.k8s.io/v1/ClusterRole": { ...neutral, validate: (o) => Rbac.validateRules(Views.clusterRole(o).rules, false) },
    "rbac.authorization.k8s.io/v1/RoleBinding": {
      ...neutral,
      defaults: (o) => Rbac.defaultSubjects(Views.roleBinding(o)),
      validate: (o) => Rbac.validateBinding(Views.roleBinding(o), true),
      validateUpdate: roleRefImmutable
    },
    "rbac.authorization.k8s.io/v1/ClusterRoleBinding": {
      ...neutral,
      defaults: (o) => Rbac.defaultSubjects(Views.clusterRoleBinding(o)),
      validate: (o) => Rbac.validateBinding(Views.clusterRoleBinding(o), false),
      validateUpdate: roleRefImmutable
    }
  },
  columns: {},
  withStatus: [],
  scale: {},
  inAll: []
}
