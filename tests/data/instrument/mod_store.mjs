export class Store {
  constructor() { this.items = new Map(); }
  put(item) { this.items.set(item.key(), item); }
  get(k) { return this.items.get(k); }
  size() { return this.items.size; }
}
