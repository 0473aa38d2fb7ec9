import 'dart:io';

import 'package:tollgate_image_info/tollgate_image_info.dart';

Future<void> main() async {
  final client = ImageInfoClient(Platform.environment['TOLLGATE_API_KEY']!);
  try {
    final response = await client.executeWithFile('photo.png');
    print(response.data);
    print('credits left: ${response.credits?.remaining}');
  } finally {
    client.close();
  }
}
