"""The business tables, which the tests create with SQL."""

from django.db import models


class Payment(models.Model):
    key = models.TextField()
    amount = models.DecimalField(max_digits=20, decimal_places=2)
    app = models.TextField(default="django")

    class Meta:
        managed = False
        db_table = "payments"


class Shipment(models.Model):
    key = models.TextField()
    downstream_key = models.TextField()
    app = models.TextField(default="django")

    class Meta:
        managed = False
        db_table = "shipments"
