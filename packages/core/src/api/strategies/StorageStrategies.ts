/** The `storage.k8s.io` group (`pkg/registry/storage`): StorageClass defaults, rules and columns. */
import * as Storage from "../../model/Storage.js"
import * as Views from "../../object/Views.js"
import type { GroupStrategies } from "../Strategy.js"
import { age } from "./Printing.js"
import { neutral, typed, typedUpdate } from "./Rules.js"

/** The storage group's strategies, columns and subresources. */
export const group: GroupStrategies = {
  strategies: {
    "storage.k8s.io/v1/StorageClass": {
      ...neutral,
      defaults: Storage.defaults,
      validate: typed(Storage.StorageClass, Storage.validateStorageClass),
      validateUpdate: typedUpdate(Storage.StorageClass, Storage.validateStorageClassUpdate)
    }
  },
  columns: {
    // kubectl's columns; the name carries "(default)" there, a printer detail Fleet leaves to the column below.
    StorageClass: [
      { name: "Provisioner", type: "string", value: ".provisioner" },
      { name: "ReclaimPolicy", type: "string", value: ".reclaimPolicy" },
      { name: "VolumeBindingMode", type: "string", value: ".volumeBindingMode" },
      { name: "AllowVolumeExpansion", type: "boolean", value: (o) => Views.storageClass(o).allowVolumeExpansion === true },
      age
    ]
  },
  withStatus: [],
  scale: {},
  inAll: []
}
