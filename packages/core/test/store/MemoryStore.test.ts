import { Store } from "@koder/fleet-core"
import { StoreContract } from "@koder/fleet-core/testing"

StoreContract.suite("memory", Store.layerMemory)
