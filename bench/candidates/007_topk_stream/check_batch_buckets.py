"""Brute-force check of the BATCH variant's bucket arithmetic (solution.cu): an element y lands in bucket
j = #{sorted proposals < y}; the mass strictly above proposal q is the sum of buckets j >= U_q with
U_q = #{proposals <= y_q}. Random rows with many ties, 2000 trials. Usage: python3 check_batch_buckets.py"""
import bisect
import random

random.seed(7)
for _ in range(2000):
    ys = [random.choice([0.0, 0.5, 1.0, 1.5, 2.0, random.random() * 3]) for _ in range(random.randint(1, 50))]
    props = [random.choice(ys) for _ in range(random.randint(1, 16))]
    sy = sorted(props)
    buckets = [0.0] * (len(sy) + 1)
    for y in ys:
        j = bisect.bisect_left(sy, y)
        if j > 0:
            buckets[j] += 2.0 ** y
    for yq in props:
        u = sum(1 for v in sy if v <= yq)
        got = sum(buckets[u:])
        want = sum(2.0 ** y for y in ys if y > yq)
        assert abs(got - want) < 1e-9, (got, want)
print("batch buckets: 2000 random rows, every proposal's mass above matches")
