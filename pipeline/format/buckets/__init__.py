"""The bucket schemes other than the dynamic one: Hudi's simple bucket index (a fixed count
per partition, grown by whole multiples) and consistent hashing (a ring of hash ranges per
partition, split and merged). Neither keeps any state but the table's own files: a key's
bucket is a function of the key and the layout in force, recorded per instant."""
