import { Store } from "./mod_store.mjs";

class Item {
  constructor(id) { this.id = id; }
  key() { return "item-" + this.id; }
}

const store = new Store();
for (let i = 0; i < 4; i++) store.put(new Item(i));
console.log(store.size(), store.get("item-2").id, import.meta.url.endsWith("mod_main.mjs"));
