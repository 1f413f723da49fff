from django.urls import path

from . import views

urlpatterns = [
    path("health", views.health),
    path("payments", views.create_payment),
    path("payments/<int:payment_id>/refunds", views.refund),
    path("flaky", views.flaky),
    path("shipments", views.ship),
    path("refusals", views.refuse),
    path("releases", views.release),
    path("twice", views.twice),
    path("stash", views.stash),
    path("late", views.late),
]
